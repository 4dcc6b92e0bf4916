package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// What agents, models, tasks and project files wrote reaches the person's
// terminal through this CLI (answers, messages, task output, logs, team
// errors, agent reasons). On a terminal, their control characters would
// drive it: retitle the window (ESC ] 0 ; … BEL), clear the screen
// (ESC [ 2 J), move the cursor to overwrite what was printed, or answer
// back. So text written to a terminal goes through safeText, unless the
// person passes --raw; output to a pipe or file is left as it is, and
// --json output is JSON, written as it is.

// safeText returns s with every control character but newline and tab
// shown as visible text \xNN (two lower-case hex digits): C0 (0x00–0x1f),
// DEL (0x7f) and C1 (U+0080–U+009F), and any byte that is not part of
// valid UTF-8 (a lone 0x9b is CSI to an 8-bit terminal). Characters that
// change how the text around them reads without showing themselves are
// shown as \u{XXXX} (lower-case hex): Unicode's format characters
// (category Cf: the bidi controls U+202A–U+202E, U+2066–U+2069, U+200E,
// U+200F, U+061C that reorder what follows, the zero-width U+200B–U+200D,
// U+2060, U+FEFF, the invisible tag characters U+E0000–U+E007F, the soft
// hyphen) and the line and paragraph separators U+2028, U+2029. Everything
// else, including every printable Unicode character, is kept.
func safeText(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r > 0x9f && unsafeRune(r, n):
			fmt.Fprintf(&b, `\u{%04x}`, r)
		case unsafeRune(r, n):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// unsafeRune reports whether the rune r, decoded from n bytes, is one that
// safeText shows escaped.
func unsafeRune(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r < 0xad: // the first format character: plain text stays fast
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// safeWriter passes each Write through safeText while on says so (stdout
// or stderr is a terminal and --raw is not given). The CLI writes whole
// formatted lines or cells, so no character is split between two Writes.
type safeWriter struct {
	w  io.Writer
	on func() bool
}

func (s *safeWriter) Write(p []byte) (int, error) {
	if !s.on() {
		return s.w.Write(p)
	}
	if _, err := io.WriteString(s.w, safeText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// plural is "1 agent", "2 agents", "0 agents".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
