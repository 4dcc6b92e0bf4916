package term

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// TestParserShrunk: the library's parser is still where shrinkParser
// reaches it, and an OSC longer than its buffer is cut, not fatal.
func TestParserShrunk(t *testing.T) {
	if !shrinkParser(vt.NewEmulator(10, 2)) {
		t.Fatal("shrinkParser found no parser: the emulator library changed; each emulator holds 4 MB again")
	}
	e := NewEmulator(20, 3, nil)
	defer e.Close()
	e.Write([]byte("\x1b]0;" + strings.Repeat("x", 200<<10) + "\x07after"))
	if !Contains(e.Text(), "after") {
		t.Errorf("text after a 200 KB title lost: %q", e.Text())
	}
}

// TestEraseAbove: ED 1 erases from the screen's start to the cursor,
// inclusive, and keeps the rest of the cursor's row (the library erased
// the whole row).
func TestEraseAbove(t *testing.T) {
	e := NewEmulator(10, 3, nil)
	defer e.Close()
	e.Write([]byte("aaaaaaaaaa\r\nbbbbbbbbbb\r\ncccccccccc\x1b[2;5H\x1b[1J"))
	want := "\n     bbbbb\ncccccccccc"
	if got := e.Text(); got != want {
		t.Errorf("after ED 1 at row 2 col 5:\n%q\nwant\n%q", got, want)
	}
}

// TestAltScreenKeepsScrollback: the main screen's scrollback stays while
// the alternate screen is used, and the alternate screen's repaints (ED
// 2) pile nothing up.
func TestAltScreenKeepsScrollback(t *testing.T) {
	e := NewEmulator(20, 3, nil)
	defer e.Close()
	e.Write([]byte("one\r\ntwo\r\nthree\r\nfour\r\nfive"))
	before := e.Screen().Scrollback
	if len(before) == 0 {
		t.Fatal("no scrollback after 5 lines on 3 rows")
	}
	e.Write([]byte("\x1b[?1049h"))
	for i := range 300 {
		e.Write([]byte("\x1b[2J\x1b[Hframe " + strings.Repeat("#", i%10)))
	}
	s := e.Screen()
	if !s.AltScreen || !Contains(s.Text(), "frame") {
		t.Fatalf("alt screen: %+v", s)
	}
	if strings.Join(s.Scrollback, "\n") != strings.Join(before, "\n") {
		t.Errorf("scrollback changed while on the alternate screen: %q, was %q", s.Scrollback, before)
	}
	e.Write([]byte("\x1b[?1049l"))
	if s := e.Screen(); s.AltScreen || !Contains(s.Text(), "five") {
		t.Errorf("back on the main screen: %+v", s)
	}
}
