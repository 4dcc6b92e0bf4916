package vt

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// troupe: the fast paths (printable ASCII runs, simple CSI sequences, the
// ground state's controls, narrow cells and erases stored directly, the
// memoized segmentation, the rotating line feed) against the general ones.

// stateOf is what a program's output leaves in e: the screen with its
// styles and links, the cursor, the scrollback, the title.
func stateOf(e *Emulator) string {
	var b strings.Builder
	b.WriteString(e.Render())
	x, y := e.scr.CursorPosition()
	fmt.Fprintf(&b, "\ncursor %d,%d phantom %v alt %v title %q last %q\n", x, y, e.atPhantom, e.IsAltScreen(), e.title, e.lastChar)
	for _, l := range e.Scrollback().Lines() {
		b.WriteString(l.Render())
		b.WriteByte('\n')
	}
	return b.String()
}

// writeBoth feeds data in chunks of size n to a fast and a slow emulator
// and fails when their states differ.
func writeBoth(t *testing.T, data []byte, n int) {
	t.Helper()
	fast, slow := NewEmulator(20, 6), NewEmulator(20, 6)
	fast.SetScrollbackSize(50)
	slow.SetScrollbackSize(50)
	slow.SetSlowScroll(true)
	slow.slowPaths = true
	slow.scrs[0].slowFill, slow.scrs[1].slowFill = true, true
	// The replies to queries, drained until the pipes close (as
	// internal/term does: Close's flag is not safe beside a Read).
	var wg sync.WaitGroup
	for _, e := range []*Emulator{fast, slow} {
		wg.Go(func() {
			_, _ = io.Copy(io.Discard, e.pr)
		})
	}
	defer func() {
		fast.pw.CloseWithError(io.EOF)
		slow.pw.CloseWithError(io.EOF)
		wg.Wait()
	}()
	for i := 0; i < len(data); i += n {
		part := data[i:min(i+n, len(data))]
		fast.Write(part)
		slow.Write(part)
		if f, s := stateOf(fast), stateOf(slow); f != s {
			t.Fatalf("after %q of %q (chunks of %d):\nfast: %q\nslow: %q", part, data, n, f, s)
		}
	}
}

var fastPathSeeds = []string{
	"hello world\r\nsecond line",
	"0123456789012345678901234567890123456789 wraps at the edge",
	"abc\x1b[1;31mred\x1b[0m \x1b[38;5;200mpink\x1b[m\x1b[K",
	"\x1b[3;5Hxy\x1b[2K\x1b[1;1H\x1b[J\x1b[5X\x1b[;H\x1b[;;m",
	"e\u0301 a\u0308bc 日本語 テキスト ───── ┌──┐ ✻ ❯ ⏵⏵ naïve",
	"日本語日本語日本語日本語xx",
	"\x1b(0lqqk\x1b(B abc \x1bN\x1b*0xyz",
	"\x1b[2;4r\x1b[4;1H1\n2\n3\n4\n\x1b[r\x1b[6;1H5\n6\n7\n8",
	"\x1b[20hone\ntwo\nthree\nfour\nfive\nsix\nseven\x1b[20l",
	"\x1b[?7lno autowrap past the right edge of the screen\x1b[?7h",
	"\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ after",
	"\x1b[?1049halt\r\n\r\n\r\n\r\n\r\n\r\n\r\nscroll\x1b[?1049lmain",
	"\x1b[123456789;2Hbig\x1b[1:2mcolon\x1b[?25l\x1b[>c\x1b[6n\x1b[ q",
	"tab\there\x08\x08back\x7fdel\x1b[4hins\x1b[4l",
	"\x1b[44m\x1b[6;20Hz\n\n\x1b[45mabc\x1b[1K\x1b[2J",
	"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18m many",
	"a\x1b[1\n2Hb\x1b[3\x184Hc",
	"wide at edge: 0123456789012345678日x",
}

func TestFastPathsSameAsSlow(t *testing.T) {
	for _, s := range fastPathSeeds {
		for _, n := range []int{1, 3, 7, 1 << 20} {
			writeBoth(t, []byte(s), n)
		}
	}
	// A long random mix of the seeds' pieces, split anywhere.
	r := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	for range 400 {
		s := fastPathSeeds[r.IntN(len(fastPathSeeds))]
		i, j := r.IntN(len(s)+1), r.IntN(len(s)+1)
		b.WriteString(s[min(i, j):max(i, j)])
	}
	for _, n := range []int{5, 64, 1 << 20} {
		writeBoth(t, []byte(b.String()), n)
	}
}

func FuzzFastPaths(f *testing.F) {
	for _, s := range fastPathSeeds {
		f.Add([]byte(s), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		if len(data) > 4<<10 {
			return
		}
		writeBoth(t, data, int(n)+1)
	})
}

// TestAltScreenKeepsNoScrollback: the alternate screen's repaints (ED 2)
// and scrolling keep nothing (upstream pushed them into a hidden scrollback
// of 10,000 lines that nothing reads), and the main screen's is kept.
func TestAltScreenKeepsNoScrollback(t *testing.T) {
	e := NewEmulator(10, 3)
	e.Write([]byte("1\r\n2\r\n3\r\n4\r\n"))
	main := e.Scrollback().Len()
	e.Write([]byte("\x1b[?1049h"))
	for range 100 {
		e.Write([]byte("\x1b[2J\x1b[Hframe\r\n\r\n\r\n\r\n"))
	}
	if n := e.scrs[1].Scrollback().Len(); n != 0 {
		t.Errorf("the alternate screen kept %d lines", n)
	}
	if n := e.Scrollback().Len(); n != main || main == 0 {
		t.Errorf("the main screen's scrollback went from %d to %d lines", main, n)
	}
}
