package term

import (
	"bytes"
	"strconv"
)

// The output an attached person's terminal gets (troupe attach, the web
// UI's terminal) is the program's, less the escape sequences that act on
// the person's machine rather than on the screen. The agent's program
// draws what the model makes it draw, so its output is not trusted with:
//
//   - OSC 52 (write or read the person's clipboard: a command planted for
//     the next paste, or the clipboard sent to the agent as keys), OSC 50
//     (fonts), OSC 1337 (iTerm2: files written to disk, variables), the
//     kitty and other vendor OSCs: every OSC but those kept below;
//   - DCS strings other than the queries DECRQSS ($q), XTGETTCAP (+q) and
//     sixel images: tmux passthrough (tmux;…, which hands any sequence to
//     the terminal around tmux), kitty remote control (@kitty-cmd, which
//     can start programs);
//   - APC, PM and SOS strings (kitty graphics among them, which can read
//     a file of the person's machine);
//   - window operations (CSI … t) that move, resize, raise, lower or
//     iconify the person's window; the reports (sizes, title) stay.
//
// Kept: titles (OSC 0/1/2), colours and their queries (OSC 4, 10–12, 104,
// 110–112: TUIs ask the background colour), the working folder (OSC 7),
// hyperlinks (OSC 8), notifications (OSC 9, 777), prompt marks (OSC 133,
// 633), and every other sequence. The replies a query calls for go to the
// program as keys, as they would on any terminal. The emulator that keeps
// the screen is fed everything; only the viewers' stream is filtered. Raw
// 8-bit C1 controls are passed as they are (in UTF-8 they are parts of
// characters to the terminals troupe targets).

// keptOSC are the OSC numbers passed to viewers.
var keptOSC = map[int]bool{0: true, 1: true, 2: true, 4: true, 7: true, 8: true, 9: true, 10: true, 11: true, 12: true,
	104: true, 110: true, 111: true, 112: true, 133: true, 633: true, 777: true}

// Bounds of what is held to judge a sequence: a string's head (an OSC's
// number, a DCS's parameters) and a whole CSI. A string whose head is
// longer is dropped, so is a CSI (no terminal sequence comes near).
const (
	maxSeqHead = 64
	maxCSI     = 512
)

type filterState uint8

const (
	fsGround  filterState = iota
	fsEsc                 // after ESC
	fsCSI                 // in ESC [ … (held in head)
	fsCSIDrop             // in a CSI longer than maxCSI, dropped
	fsStrHead             // in a string's head (held), not decided yet
	fsStrPass             // in a string passed on
	fsStrDrop             // in a string dropped
	fsStrEsc              // ESC inside a string: ST or the start of another sequence
)

// outputFilter removes the sequences above from a byte stream, across
// writes. Not safe for concurrent use (the Terminal's reader owns it,
// under its lock).
type outputFilter struct {
	state filterState
	kind  byte // the string's introducer: ']' OSC, 'P' DCS, '_' APC, '^' PM, 'X' SOS
	pass  bool // the string in fsStrEsc is passed on
	head  []byte
}

// filter returns b less the dropped sequences, appended to dst.
func (f *outputFilter) filter(dst, b []byte) []byte {
	for _, c := range b {
		switch f.state {
		case fsGround:
			if c == 0x1b {
				f.state = fsEsc
				continue
			}
			dst = append(dst, c)
		case fsEsc:
			dst = f.escape(dst, c)
		case fsCSI:
			switch {
			case c == 0x1b: // aborted, as on a terminal
				f.head, f.state = f.head[:0], fsEsc
			case c == 0x18 || c == 0x1a:
				f.head, f.state = f.head[:0], fsGround
				dst = append(dst, c)
			case c >= 0x40 && c <= 0x7e: // the final byte
				f.head = append(f.head, c)
				if keepCSI(f.head) {
					dst = append(dst, 0x1b, '[')
					dst = append(dst, f.head...)
				}
				f.head, f.state = f.head[:0], fsGround
			case len(f.head) >= maxCSI:
				f.head, f.state = f.head[:0], fsCSIDrop
			default:
				f.head = append(f.head, c)
			}
		case fsCSIDrop:
			if c >= 0x40 && c <= 0x7e || c == 0x18 || c == 0x1a {
				f.state = fsGround
			} else if c == 0x1b {
				f.state = fsEsc
			}
		case fsStrHead:
			if c == 0x07 || c == 0x1b || c == 0x18 || c == 0x1a || len(f.head) >= maxSeqHead || f.decided(c) {
				f.pass = f.keepString(f.head, c)
				if f.pass {
					dst = append(dst, 0x1b, f.kind)
					dst = append(dst, f.head...)
				}
				f.head = f.head[:0]
				f.state = fsStrDrop
				if f.pass {
					f.state = fsStrPass
				}
				dst = f.inString(dst, c)
				continue
			}
			f.head = append(f.head, c)
		case fsStrPass, fsStrDrop:
			dst = f.inString(dst, c)
		case fsStrEsc:
			if c == '\\' { // ST
				if f.pass {
					dst = append(dst, 0x1b, '\\')
				}
				f.state = fsGround
				continue
			}
			// ESC then something else ends the string and begins a
			// new sequence, as on a terminal.
			dst = f.escape(dst, c)
		}
	}
	return dst
}

// escape handles the byte after an ESC.
func (f *outputFilter) escape(dst []byte, c byte) []byte {
	switch c {
	case '[':
		f.state = fsCSI
	case ']', 'P', '_', '^', 'X':
		f.state, f.kind = fsStrHead, c
	case 0x1b:
		dst = append(dst, 0x1b) // ESC ESC: the first stands alone
		f.state = fsEsc
	default:
		dst = append(dst, 0x1b, c)
		f.state = fsGround
	}
	return dst
}

// inString handles a byte of a string whose fate is decided.
func (f *outputFilter) inString(dst []byte, c byte) []byte {
	pass := f.state == fsStrPass
	switch {
	case c == 0x1b:
		f.pass, f.state = pass, fsStrEsc
		return dst
	case c == 0x07 && f.kind == ']', c == 0x18, c == 0x1a: // BEL ends an OSC; CAN and SUB cancel
		f.state = fsGround
	}
	if pass {
		dst = append(dst, c)
	}
	return dst
}

// decided says whether the head (plus c) is enough to judge the string:
// an OSC's number ends at ';'; a DCS's at its final byte.
func (f *outputFilter) decided(c byte) bool {
	switch f.kind {
	case ']':
		return c == ';'
	case 'P':
		return c >= 0x40 && c <= 0x7e
	}
	return true // APC, PM, SOS: dropped whatever they hold
}

// keepString judges a string from its head and the byte that decided.
func (f *outputFilter) keepString(head []byte, c byte) bool {
	switch f.kind {
	case ']':
		n, err := strconv.Atoi(string(head))
		return err == nil && keptOSC[n]
	case 'P':
		// Kept: DECRQSS ($q), XTGETTCAP (+q), sixel (digits and ;,
		// then q).
		if c != 'q' {
			return false
		}
		i := 0
		for i < len(head) && (head[i] >= '0' && head[i] <= '9' || head[i] == ';') {
			i++
		}
		inter := string(head[i:])
		return inter == "" && i == len(head) || inter == "$" && i == 0 || inter == "+" && i == 0
	}
	return false
}

// keepCSI judges a CSI (its bytes after ESC [, the final byte last): all
// but the window operations that act on the person's window.
func keepCSI(seq []byte) bool {
	if seq[len(seq)-1] != 't' {
		return true
	}
	p := seq[:len(seq)-1]
	if i := bytes.IndexByte(p, ';'); i >= 0 {
		p = p[:i]
	}
	n, err := strconv.Atoi(string(p))
	if err != nil {
		return true // not XTWINOPS (a private or intermediate form)
	}
	// 1–9: de-iconify, iconify, move, resize (pixels), raise, lower,
	// refresh, resize (characters), maximize; 10: full screen; 24 and
	// more: resize to that many lines (DECSLPP).
	return n >= 11 && n <= 23
}
