package term

import (
	"io"
	"strings"
	"sync"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// noFastScroll turns the emulator's fast line feed off (the differential
// tests compare it with the general scroll).
var noFastScroll = false

// DefaultScrollback is how many lines scrolled off the main screen an
// Emulator keeps.
const DefaultScrollback = 2000

// MaxReplyQueue bounds the replies to terminal queries waiting to be
// written to the program; beyond it they are dropped (a program flooding
// queries without reading its input gets no more answers).
const MaxReplyQueue = 64 << 10

// Screen is a copy of what the terminal shows.
type Screen struct {
	Cols, Rows int
	// Lines are the rows of the screen, trailing spaces trimmed.
	Lines []string
	// Scrollback are the lines scrolled off the top of the main screen,
	// oldest first (at most DefaultScrollback); kept while the program
	// uses the alternate screen.
	Scrollback []string
	CursorX    int
	CursorY    int
	AltScreen  bool
	Title      string
}

// Text is the screen's rows joined by newlines, trailing blank rows
// dropped.
func (s Screen) Text() string {
	lines := s.Lines
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// All is the scrollback followed by the screen's text.
func (s Screen) All() string {
	if len(s.Scrollback) == 0 {
		return s.Text()
	}
	return strings.Join(s.Scrollback, "\n") + "\n" + s.Text()
}

// Emulator is a headless terminal: bytes in, screen out. Replies the
// program's queries call for (device attributes, cursor position) go to
// the reply function given to NewEmulator.
type Emulator struct {
	mu    sync.Mutex // guards vt and title; vt is not safe on its own
	vt    *vt.Emulator
	title string
	alt   bool
	paste bool // the program turned bracketed paste on (DECSET 2004)

	pw        *io.PipeWriter // the emulator's reply pipe, closed by Close
	drainDone chan struct{}
	closeOnce sync.Once
}

// NewEmulator makes an emulator of cols×rows. reply, if not nil, gets the
// emulator's answers to terminal queries, in order; it is called from the
// emulator's drain goroutine, must not block, and owns the slice.
func NewEmulator(cols, rows int, reply func([]byte)) *Emulator {
	cols, rows = max(cols, 1), max(rows, 1)
	e := &Emulator{vt: vt.NewEmulator(cols, rows), drainDone: make(chan struct{})}
	e.vt.SetScrollbackSize(DefaultScrollback)
	e.vt.SetSlowScroll(noFastScroll)
	e.vt.SetCallbacks(vt.Callbacks{
		Title:     func(t string) { e.title = t }, // called inside Write, mu held
		AltScreen: func(on bool) { e.alt = on },
		EnableMode: func(m ansi.Mode) {
			if m == ansi.ModeBracketedPaste {
				e.paste = true
			}
		},
		DisableMode: func(m ansi.Mode) {
			if m == ansi.ModeBracketedPaste {
				e.paste = false
			}
		},
	})
	// The reply pipe is synchronous: a query blocks Write until someone
	// reads its answer, so a goroutine always reads.
	e.pw, _ = e.vt.InputPipe().(*io.PipeWriter)
	go e.drain(reply)
	return e
}

// drain reads the emulator's replies until Close.
func (e *Emulator) drain(reply func([]byte)) {
	defer close(e.drainDone)
	buf := make([]byte, 4096)
	for {
		n, err := e.vt.Read(buf)
		if n > 0 && reply != nil {
			reply(append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			return
		}
	}
}

// Write feeds the program's output to the emulator.
func (e *Emulator) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.vt.Write(p)
}

// BracketedPaste reports whether the program turned bracketed paste on.
func (e *Emulator) BracketedPaste() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paste
}

// Resize changes the emulator's size.
func (e *Emulator) Resize(cols, rows int) {
	cols, rows = max(cols, 1), max(rows, 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vt.Resize(cols, rows)
}

// Size is the emulator's columns and rows.
func (e *Emulator) Size() (cols, rows int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.vt.Width(), e.vt.Height()
}

// Screen copies what the terminal shows, with its scrollback.
func (e *Emulator) Screen() Screen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.screenLocked(true)
}

// Text is the screen's text without the scrollback (Screen().Text(),
// cheaper).
func (e *Emulator) Text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.screenLocked(false).Text()
}

func (e *Emulator) screenLocked(scrollback bool) Screen {
	w, h := e.vt.Width(), e.vt.Height()
	s := Screen{Cols: w, Rows: h, AltScreen: e.alt, Title: e.title}
	p := e.vt.CursorPosition()
	s.CursorX, s.CursorY = p.X, p.Y
	s.Lines = make([]string, h)
	line := make(uv.Line, w)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			if c := e.vt.CellAt(x, y); c != nil {
				line[x] = *c
			} else {
				line[x] = uv.EmptyCell
			}
		}
		s.Lines[y] = strings.TrimRight(line.String(), " ")
	}
	if scrollback {
		if sb := e.vt.Scrollback(); sb != nil {
			for _, l := range sb.Lines() {
				s.Scrollback = append(s.Scrollback, strings.TrimRight(l.String(), " "))
			}
		}
	}
	return s
}

// Render is the screen as text with its styles as escape sequences,
// starting from a cleared screen and ending with the cursor in place: what
// an attaching viewer is sent first.
func (e *Emulator) Render() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	b.WriteString("\x1b[0m\x1b[H\x1b[2J")
	lines := strings.Split(e.vt.Render(), "\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
	}
	p := e.vt.CursorPosition()
	b.WriteString("\x1b[0m")
	b.WriteString(ansi.CursorPosition(p.X+1, p.Y+1))
	return []byte(b.String())
}

// Close stops the drain goroutine; writes after it are ignored.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		if e.pw != nil {
			e.pw.CloseWithError(io.EOF)
		}
	})
	<-e.drainDone
	return nil
}
