package vt

import (
	"unicode/utf8"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

// printableASCII reports whether r is a character that can never join the
// grapheme cluster beside it. No ASCII character is a combining mark, a ZWJ, a
// spacing mark or a regional indicator, and CR and LF are not printable, so a
// cluster boundary between two of these is certain without asking the
// segmenter.
func printableASCII(r rune) bool {
	return r >= ansi.SP && r < ansi.DEL
}

// asciiString holds the one-character strings of the ASCII characters, so
// printing one allocates no string. (troupe)
var asciiString = func() (s [128]string) {
	for i := range s {
		s[i] = string(rune(i))
	}
	return s
}()

// handlePrint handles printable characters.
//
// A character is held back rather than printed straight away, because the one
// after it may be a combining mark that belongs to the same cluster. Printing
// "e" from "e\u0301" before the mark arrives puts the base in one cell and
// leaves the mark to become a zero-width cell of its own, which the next write
// or erase then destroys.
func (e *Emulator) handlePrint(r rune) {
	// No ASCII character can extend the cluster before it: none of them is
	// Extend, ZWJ, SpacingMark, Prepend, a regional indicator, or part of an
	// Indic conjunct. So an ASCII character arriving is proof that whatever is
	// buffered is finished, and the buffer can go out.
	//
	// This is also what keeps the buffer from being re-segmented as it grows.
	// Asking where the clusters are on every character costs the length of the
	// buffer each time, which is quadratic over a long run of combining marks
	// that never resolves into more than one cluster.
	if printableASCII(r) {
		// Two printable ASCII characters in a row is the common case by a wide
		// margin, and needs no segmenting at all.
		if len(e.grapheme) == 1 && printableASCII(rune(e.grapheme[0])) {
			e.handleGrapheme(asciiString[e.grapheme[0]], 1)
			e.grapheme = utf8.AppendRune(e.grapheme[:0], r)
			return
		}
		e.flushGrapheme()
	}

	e.grapheme = utf8.AppendRune(e.grapheme, r)
}

// printASCIIRun handles run, printable ASCII characters, as handlePrint does
// one by one: the first flushes what is buffered, each is printed when the
// next arrives, and the last stays buffered. (troupe)
func (e *Emulator) printASCIIRun(run []byte) {
	e.handlePrint(rune(run[0]))
	if len(run) == 1 {
		return
	}
	// The buffer holds run[0] alone now.
	for s := run[:len(run)-1]; len(s) > 0; {
		k := e.printASCIIFast(s)
		s = s[k:]
		if len(s) > 0 {
			e.handleGrapheme(asciiString[s[0]], 1)
			s = s[1:]
		}
	}
	e.grapheme = append(e.grapheme[:0], run[len(run)-1])
}

// printASCIIFast prints the longest start of s, printable ASCII characters,
// that it can store straight into the cursor's row, and says how long it
// was: what handleGrapheme does for each when no wrap is pending, no
// character set maps ASCII, no cursor callback is set, and each character
// lands short of the last column on a one-column cell. (troupe)
func (e *Emulator) printASCIIFast(s []byte) int {
	scr := e.scr
	if e.atPhantom || e.gsingle != 0 || e.charsets[e.gl] != nil || scr.cb == nil || scr.cb.CursorPosition != nil {
		return 0
	}
	x, y := scr.cur.X, scr.cur.Y
	lines := scr.buf.Lines
	if y < 0 || y >= len(lines) || x < 0 {
		return 0
	}
	line := lines[y]
	pen, link := scr.cur.Pen, scr.cur.Link
	k := 0
	for k < len(s) && x+k < len(line)-1 && line[x+k].Width == 1 {
		line[x+k] = uv.Cell{Content: asciiString[s[k]], Style: pen, Link: link, Width: 1}
		k++
	}
	if k > 0 {
		e.lastChar = rune(s[k-1])
		scr.buf.TouchLine(x, y, k)
		scr.cur.X = x + k
	}
	return k
}

// flushGrapheme flushes the current grapheme buffer, if any, and handles the
// grapheme as a single unit.
func (e *Emulator) flushGrapheme() {
	if len(e.grapheme) == 0 {
		return
	}

	// XXX: We always use [ansi.GraphemeWidth] here to report accurate widths
	// and it's up to the caller to decide how to handle Unicode vs non-Unicode
	// modes.
	graphemes := e.grapheme
	// troupe: a printable ASCII character followed by another, or last, is a
	// cluster of its own one column wide (nothing ASCII extends a cluster);
	// the segmenter is asked only about what is left.
	for !e.slowPaths && len(graphemes) > 0 && printableASCII(rune(graphemes[0])) &&
		(len(graphemes) == 1 || printableASCII(rune(graphemes[1]))) {
		e.handleGrapheme(asciiString[graphemes[0]], 1)
		graphemes = graphemes[1:]
	}
	if len(graphemes) > 0 {
		for _, c := range e.segment(graphemes) {
			e.handleGrapheme(c.content, c.width)
		}
	}
	e.grapheme = e.grapheme[:0] // Reset the grapheme buffer.
}

// cluster is one grapheme cluster and its width.
type cluster struct {
	content string
	width   int
}

// Bounds of the memo of segment: the runs it keeps, and their length.
const (
	maxSegmentMemo    = 256
	maxSegmentMemoRun = 64
)

// segment splits b into grapheme clusters with their widths. (troupe: the
// split of short runs is kept, at most maxSegmentMemo of them, the memo
// emptied when full: a program draws the same glyphs, box lines and words
// again and again, and the segmenter and a string per cluster were most of
// the time a non-ASCII character took.)
func (e *Emulator) segment(b []byte) []cluster {
	if cs, ok := e.segments[string(b)]; ok && !e.slowPaths {
		return cs
	}
	// XXX: We always use [ansi.GraphemeWidth] here to report accurate widths
	// and it's up to the caller to decide how to handle Unicode vs non-Unicode
	// modes.
	method := ansi.GraphemeWidth
	var cs []cluster
	for rest := b; len(rest) > 0; {
		c, width := ansi.FirstGraphemeCluster(rest, method)
		if len(c) == 0 {
			break
		}
		cs = append(cs, cluster{string(c), width})
		rest = rest[len(c):]
	}
	if len(b) <= maxSegmentMemoRun {
		if len(e.segments) >= maxSegmentMemo || e.segments == nil {
			e.segments = make(map[string][]cluster, maxSegmentMemo)
		}
		e.segments[string(b)] = cs
	}
	return cs
}

// handleGrapheme handles UTF-8 graphemes.
func (e *Emulator) handleGrapheme(content string, width int) {
	awm := e.autoWrap
	cell := uv.Cell{
		Content: content,
		Width:   width,
		Style:   e.scr.cursorPen(),
		Link:    e.scr.cursorLink(),
	}

	x, y := e.scr.CursorPosition()
	if e.atPhantom && awm {
		// moves cursor down similar to [Terminal.linefeed] except it doesn't
		// respects [ansi.LNM] mode.
		// This will reset the phantom state i.e. pending wrap state.
		e.index()
		_, y = e.scr.CursorPosition()
		x = 0
	}

	// A single shift applies to the next character, whatever that character
	// turns out to be. Take it now, so it cannot leak onto the one after this
	// when this is a cluster no charset has a mapping for.
	single := e.gsingle
	e.gsingle = 0

	// Handle character set mappings
	if len(content) == 1 { //nolint:nestif
		var charset CharSet
		c := content[0]
		if single > 1 && single < 4 {
			charset = e.charsets[single]
		} else if c < 128 {
			charset = e.charsets[e.gl]
		} else {
			charset = e.charsets[e.gr]
		}

		if charset != nil {
			if r, ok := charset[c]; ok {
				cell.Content = r
				cell.Width = 1
			}
		}
	}

	if cell.Width == 1 && len(content) == 1 {
		e.lastChar, _ = utf8.DecodeRuneInString(content)
	}

	if e.slowPaths || !e.scr.setNarrowCell(x, y, &cell) {
		e.scr.SetCell(x, y, &cell)
	}

	// Handle phantom state at the end of the line
	e.atPhantom = awm && x >= e.scr.Width()-1
	if !e.atPhantom {
		x += cell.Width
	}

	// NOTE: We don't reset the phantom state here, we handle it up above.
	e.scr.setCursor(x, y, false)
}
