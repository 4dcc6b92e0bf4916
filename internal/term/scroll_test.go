package term

import (
	"reflect"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// TestFastScrollInstalled: a line feed at the bottom of the screen moves
// the rows, not every cell (the cell under row 1 column 0 is the same cell
// in row 0 afterwards); SetSlowScroll (the differential tests' reference)
// copies them.
func TestFastScrollInstalled(t *testing.T) {
	for _, slow := range []bool{false, true} {
		v := vt.NewEmulator(10, 3)
		v.SetSlowScroll(slow)
		v.Write([]byte("a\r\nb\r\nc"))
		below := v.CellAt(0, 1)
		v.Write([]byte("\n"))
		if moved := v.CellAt(0, 0) == below; moved == slow {
			t.Errorf("slow scroll %v: row 1 moved up as a row: %v", slow, moved)
		}
		if got := v.String(); got != "b\nc\n" {
			t.Errorf("slow scroll %v: screen %q after the line feed", slow, got)
		}
	}
}

// screensOf feeds data to an emulator with or without fastScroll.
func screensOf(data []byte, fast bool) Screen {
	noFastScroll = !fast
	defer func() { noFastScroll = false }()
	e := NewEmulator(30, 8, nil)
	defer e.Close()
	feed(e, data)
	return e.Screen()
}

// checkSameScroll fails when the fast line feed leaves another screen,
// scrollback or cursor than the library's own.
func checkSameScroll(t *testing.T, data []byte) {
	t.Helper()
	fast, slow := screensOf(data, true), screensOf(data, false)
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast scroll differs on %q:\nfast: %q\nslow: %q", data, fast.All(), slow.All())
	}
}

func TestFastScrollSameAsLibrary(t *testing.T) {
	for _, s := range []string{
		"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk",
		"\x1b[41mred\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nx",
		"0123456789012345678901234567890\n\nwrap pending at the edge\x1b[8;30Hx\ny",
		"\x1b[2;5r\x1b[5;1H\n\n\nregion\x1b[r\x1b[8;1H\n\nfull",
		"\x1b[20h1\n2\n3\n4\n5\n6\n7\n8\n9\x1b[20l\n10",
		"\x1b[?1049h\x1b[8;1Halt\n\n\n\x1b[?1049lmain\n\n\n\n\n\n\n\n",
		"\v\f\v\f\v\f\v\f\v\fvt ff",
	} {
		checkSameScroll(t, []byte(s))
	}
	checkSameScroll(t, synthStream(200<<10))
	checkSameScroll(t, loadCapture(t, "tui_mcp_flow").out)
}

// FuzzFastScroll: on any input the fast line feed and the library's give
// the same screen, scrollback and cursor.
func FuzzFastScroll(f *testing.F) {
	f.Add([]byte("a\nb\nc\nd\ne\nf\ng\nh\ni\n"))
	f.Add([]byte("\x1b[2;5r\x1b[5;1H\n\n\n\x1b[r\n\n"))
	f.Add([]byte("\x1b[44m\x1b[8;30Hz\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			return
		}
		checkSameScroll(t, data)
	})
}
