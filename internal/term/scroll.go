package term

import (
	"reflect"
	"unsafe"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// fastScroll makes a line feed at the bottom of a full-screen scroll
// region cost O(rows) instead of O(rows × columns).
//
// Why: the library scrolls by copying every cell of the screen one row up
// (uv.Buffer.DeleteLineArea), about half a megabyte of cell structs per
// line feed at 120×40; on a TUI stream that scrolls this was most of the
// parse time. Here the rows' slices rotate instead: the top row goes to
// the scrollback (main screen only: the alternate screen's hidden
// scrollback is not kept), is blanked and becomes the bottom row.
//
// How: the library lets no one register control-character handlers nor
// reach its screen buffer, so this reaches four unexported fields through
// reflection (the handlers' map, the active screen, its buffer, the
// pending-wrap flag). If a later version changes any of them, fastScroll
// changes nothing and the library's own scrolling stays
// (TestFastScrollInstalled says so). Any case it does not handle (a scroll
// region, newline mode) is left to the library's handler.
type fastScroll struct {
	vt      *vt.Emulator
	scr     **vt.Screen // the emulator's active screen
	phantom *bool       // the emulator's pending-wrap flag
	main    *vt.Screen  // the main screen (its scrollback is kept)
	lnm     *bool       // newline mode is on (tracked by the emulator's callbacks)
}

// installFastScroll registers the fast line feed on v; false when the
// library's internals are not where it expects them.
func installFastScroll(v *vt.Emulator, lnm *bool) bool {
	ev := reflect.ValueOf(v).Elem()
	scr := field[*vt.Screen](ev, "scr")
	phantom := field[bool](ev, "atPhantom")
	hv := ev.FieldByName("handlers")
	if scr == nil || phantom == nil || !hv.IsValid() {
		return false
	}
	cc := field[map[byte][]vt.CcHandler](hv, "ccHandlers")
	if cc == nil || *cc == nil || *scr == nil || bufOf(*scr) == nil {
		return false
	}
	f := &fastScroll{vt: v, scr: scr, phantom: phantom, main: *scr, lnm: lnm}
	for _, c := range []byte{ansi.LF, ansi.VT, ansi.FF} {
		(*cc)[c] = append((*cc)[c], f.lineFeed) // the last registered runs first
	}
	return true
}

// field is a pointer to v's field name if it has type T, else nil.
func field[T any](v reflect.Value, name string) *T {
	f := v.FieldByName(name)
	if !f.IsValid() || f.Type() != reflect.TypeFor[T]() || !f.CanAddr() {
		return nil
	}
	return (*T)(unsafe.Pointer(f.UnsafeAddr()))
}

// bufOf is the screen's cell buffer, nil if not found.
func bufOf(s *vt.Screen) *uv.RenderBuffer {
	p := field[*uv.RenderBuffer](reflect.ValueOf(s).Elem(), "buf")
	if p == nil {
		return nil
	}
	return *p
}

// lineFeed handles LF, VT and FF when the cursor is on the last row of a
// scroll region that is the whole screen; false hands every other case to
// the library.
func (f *fastScroll) lineFeed() bool {
	if *f.lnm {
		return false
	}
	s := *f.scr
	buf := bufOf(s)
	w, h := buf.Width(), buf.Height()
	pos := s.Cursor().Position
	if s.ScrollRegion() != uv.Rect(0, 0, w, h) || pos.Y != h-1 || pos.X < 0 || pos.X >= w || h < 2 {
		return false
	}
	lines := buf.Lines
	top := lines[0]
	if s == f.main {
		s.Scrollback().Push(top) // it copies the cells it keeps
	}
	copy(lines, lines[1:])
	blank := uv.EmptyCell
	if bg := s.Cursor().Pen.Bg; bg != nil { // as the library blanks: the pen's background
		blank.Style.Bg = bg
	}
	for x := range top {
		top[x] = blank
	}
	lines[h-1] = top
	for y := range h {
		buf.TouchLine(0, y, w)
	}
	*f.phantom = false
	return true
}
