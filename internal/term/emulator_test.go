package term

import (
	"runtime"
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// TestParserShrunk: an emulator does not reserve megabytes for its
// parser's sequence data (upstream's 4 MB made 100 terminal agents hold
// 400 MB), and an OSC longer than the buffer is cut, not fatal.
func TestParserShrunk(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := vt.NewEmulator(10, 2)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("a 10×2 emulator allocated %d bytes: the parser's buffer is not cut to vt.ParserDataSize", n)
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

// TestHostileSequences: sequences a hostile program can send neither crash
// the emulator (a scroll region or margins past the screen indexed past its
// rows) nor keep it busy (a back tab or repeat of 2^31 ran 2^31 steps
// under the emulator's lock).
func TestHostileSequences(t *testing.T) {
	for _, s := range []string{
		"\x1b[2;7r00000000000\x1b[7B\n\n",
		"\x1b[?69h\x1b[2;99s\x1b[1;1Hxyz\x1b[4@\x1b[2P",
		"abc\x1b[2147483647Z\x1b[2147483647I",
		"abc\x1b[2147483647b",
	} {
		e := NewEmulator(20, 6, nil)
		e.Write([]byte(s))
		e.Close()
	}
}
