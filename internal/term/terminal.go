package term

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/sandbox"
)

// Default size of a terminal when Options leave it zero: what the
// captures of Claude Code were made at.
const (
	DefaultCols = 120
	DefaultRows = 40
)

// Bounds of a Terminal's queues.
const (
	// inputQueue is how many writes may wait for the writer goroutine.
	inputQueue = 256
	// viewerQueue is how many chunks of output may wait for one attached
	// viewer; a viewer that falls this far behind is detached.
	viewerQueue = 1024
	// maxInput is the largest single input write (a pasted message).
	maxInput = 1 << 20
)

// ErrClosed is returned by writes to a Terminal that is closing or whose
// program ended.
var ErrClosed = errors.New("terminal closed")

// Options say what to run on a Terminal. Zero values mean defaults.
type Options struct {
	Argv []string // required
	Dir  string
	// Env is the program's whole environment (proc.Env builds it); TERM
	// is set to xterm-256color when it does not say.
	Env        []string
	Cols, Rows int
	Logger     *slog.Logger
	// StopTimeout bounds each wait of Close's escalation.
	StopTimeout time.Duration
	// OnOutput, if set, is called by the reader with the size of every
	// chunk the program writes (activity, C3). It must not block.
	OnOutput func(n int)
	// Sandbox, if set, runs the program in it (proc.Spec.Sandbox).
	Sandbox *sandbox.Policy
}

// Terminal is a program running on a PTY whose output feeds an Emulator.
type Terminal struct {
	log    *slog.Logger
	proc   *proc.Process
	master *os.File // non-blocking: in Go's poller, so Close unblocks Read
	emu    *Emulator
	onOut  func(int)

	in        chan []byte   // the one writer's queue
	stop      chan struct{} // closed by Close: the writer returns
	readDone  chan struct{}
	writeDone chan struct{}
	done      chan struct{} // the child reaped and its output read
	closeOnce sync.Once

	mu       sync.Mutex // guards viewers, personAt; held while output is fed and fanned out
	viewers  map[*Viewer]struct{}
	filt     outputFilter  // the viewers' stream (sanitize.go)
	fbuf     []byte        // filt's output while nobody is attached, reused
	personAt time.Time     // the last keystroke of an attached person
	changed  chan struct{} // closed at the next output, then replaced
}

// Start runs o.Argv on a new PTY of o.Cols×o.Rows in its own session and
// process group.
func Start(o Options) (*Terminal, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("start terminal: no command")
	}
	if o.Cols <= 0 {
		o.Cols = DefaultCols
	}
	if o.Rows <= 0 {
		o.Rows = DefaultRows
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close() // the child has its own copy once started
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(o.Cols), Rows: uint16(o.Rows)}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size pty: %w", err)
	}
	master, err := nonBlocking(ptmx)
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	env := o.Env
	if !hasVar(env, "TERM") {
		env = append(append([]string(nil), env...), "TERM=xterm-256color")
	}
	p, err := proc.Start(proc.Spec{Argv: o.Argv, Dir: o.Dir, Env: env, Logger: log, StopTimeout: o.StopTimeout, TTY: tty, Sandbox: o.Sandbox})
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("start %s on a terminal: %w", o.Argv[0], err)
	}
	t := &Terminal{
		log:       log,
		proc:      p,
		master:    master,
		onOut:     o.OnOutput,
		in:        make(chan []byte, inputQueue),
		stop:      make(chan struct{}),
		readDone:  make(chan struct{}),
		writeDone: make(chan struct{}),
		done:      make(chan struct{}),
		viewers:   make(map[*Viewer]struct{}),
		changed:   make(chan struct{}),
	}
	t.emu = NewEmulator(o.Cols, o.Rows, t.reply)
	go t.read()
	go t.write()
	go t.wait()
	return t, nil
}

// nonBlocking turns the PTY master into a non-blocking file in Go's
// poller: creack/pty's is blocking, so a pending Read could not be stopped
// and read deadlines were ignored.
func nonBlocking(f *os.File) (*os.File, error) {
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

func hasVar(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// reply queues the emulator's answer to a terminal query for the program;
// when the queue is full it is dropped.
func (t *Terminal) reply(b []byte) {
	select {
	case t.in <- b:
	default:
		t.log.Debug("terminal reply dropped: input queue full", "bytes", len(b))
	}
}

// read feeds the program's output to the emulator and the viewers until
// the PTY closes (EIO once the program and its group are gone).
func (t *Terminal) read() {
	defer close(t.readDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.feed(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (t *Terminal) feed(b []byte) {
	if t.onOut != nil {
		t.onOut(len(b))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emu.Write(b)
	close(t.changed)
	t.changed = make(chan struct{})
	// The viewers get the output less the sequences that act on the
	// person's machine (sanitize.go); the filter follows the stream
	// whether or not anyone is attached.
	if len(t.viewers) == 0 {
		t.fbuf = t.filt.filter(t.fbuf[:0], b)
		return
	}
	c := t.filt.filter(make([]byte, 0, len(b)), b)
	if len(c) == 0 {
		return
	}
	for v := range t.viewers {
		select {
		case v.out <- c:
		default:
			t.detachLocked(v, "the viewer fell behind the terminal's output: detached")
		}
	}
}

// write is the one writer of the program's input.
func (t *Terminal) write() {
	defer close(t.writeDone)
	for {
		select {
		case b := <-t.in:
			if _, err := t.master.Write(b); err != nil {
				t.log.Debug("write to terminal", "err", err)
			}
		case <-t.stop:
			return
		}
	}
}

// wait closes done once the child is reaped and its output read. The
// child's group is killed when it exits (proc), so the PTY's last holder
// is gone; a process that escaped the group is cut off after the stop
// timeout.
func (t *Terminal) wait() {
	<-t.proc.Done()
	select {
	case <-t.readDone:
	case <-time.After(proc.DefaultStopTimeout):
		t.log.Warn("terminal output still open after the program exited: closed")
		t.master.Close()
		<-t.readDone
	}
	t.mu.Lock()
	for v := range t.viewers {
		t.detachLocked(v, "the program ended")
	}
	t.mu.Unlock()
	close(t.done)
}

// Changed is closed at the program's next output (the screen may have
// changed): take it, read the screen, and wait on it.
func (t *Terminal) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// WaitFor waits until cond holds on the screen, the program ends (ErrClosed)
// or ctx ends, and returns the screen it held on.
func (t *Terminal) WaitFor(ctx context.Context, cond func(Screen) bool) (Screen, error) {
	for {
		ch := t.Changed()
		s := t.Screen()
		if cond(s) {
			return s, nil
		}
		select {
		case <-ch:
		case <-t.done:
			s := t.Screen()
			if cond(s) {
				return s, nil
			}
			return s, ErrClosed
		case <-ctx.Done():
			return s, fmt.Errorf("wait for the screen: %w", context.Cause(ctx))
		}
	}
}

// Done is closed once the program has exited, been reaped and its output
// read.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// ExitErr is the program's exit error (nil for status 0); it blocks until
// the program exited.
func (t *Terminal) ExitErr() error { return t.proc.ExitErr() }

// PID is the program's process id (its session and group id too).
func (t *Terminal) PID() int { return t.proc.PID() }

// Screen copies the terminal's screen.
func (t *Terminal) Screen() Screen { return t.emu.Screen() }

// Text is the screen's text.
func (t *Terminal) Text() string { return t.emu.Text() }

// Size is the terminal's columns and rows.
func (t *Terminal) Size() (cols, rows int) { return t.emu.Size() }

// Write queues bytes for the program's input (keys, as a person would type
// them); the one writer goroutine writes them in order. It blocks while
// the queue is full, until ctx ends.
func (t *Terminal) Write(ctx context.Context, b []byte) error {
	if len(b) > maxInput {
		return fmt.Errorf("write to terminal: %d bytes is more than %d at once", len(b), maxInput)
	}
	c := append([]byte(nil), b...)
	select {
	case <-t.done:
		return ErrClosed
	case <-t.stop:
		return ErrClosed
	default:
	}
	select {
	case t.in <- c:
		return nil
	case <-t.stop:
		return ErrClosed
	case <-t.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("write to terminal: %w", context.Cause(ctx))
	}
}

// Paste writes text as a bracketed paste (so a TUI takes it as text, its
// newlines included, not as keys) when the program turned bracketed paste
// on, else as one typed line. Escape and other control characters but newline
// and tab are removed first: a message holding the end of paste sequence
// could otherwise type keys into the program.
func (t *Terminal) Paste(ctx context.Context, text string) error {
	text = PasteSafe(text)
	if !t.emu.BracketedPaste() {
		// Typed: a newline would be Enter and a tab completion, so the
		// text goes as one line.
		text = strings.Join(strings.Fields(text), " ")
		return t.Write(ctx, []byte(text))
	}
	return t.Write(ctx, []byte("\x1b[200~"+text+"\x1b[201~"))
}

// PasteSafe is text without the control characters that could end a
// bracketed paste or act as keys: everything below space and DEL, except
// newline and tab; carriage returns become newlines.
func PasteSafe(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		}
		return r
	}, text)
}

// Resize changes the terminal's size; the program gets SIGWINCH.
func (t *Terminal) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("resize terminal: %d×%d is out of range (1–1000 each)", cols, rows)
	}
	rc, err := t.master.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize terminal: %w", err)
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	}); err != nil {
		return fmt.Errorf("resize terminal: %w", err)
	}
	if ioErr != nil {
		return fmt.Errorf("resize terminal: %w", ioErr)
	}
	t.emu.Resize(cols, rows)
	return nil
}

// Signal sends sig to the program's process group.
func (t *Terminal) Signal(sig syscall.Signal) error { return t.proc.Signal(sig) }

// Close stops the program by escalation (callers write its own quit path
// first: /exit, Ctrl-D), waits for it to be reaped, and stops the
// Terminal's goroutines. It may be called more than once.
func (t *Terminal) Close(ctx context.Context) error {
	t.proc.Stop(ctx)
	var err error
	select {
	case <-t.done:
	case <-ctx.Done():
		err = fmt.Errorf("close terminal: %w", context.Cause(ctx))
	}
	t.closeOnce.Do(func() {
		close(t.stop)
		t.master.Close()
		<-t.writeDone
		t.emu.Close()
	})
	return err
}

// Viewers is how many viewers are attached.
func (t *Terminal) Viewers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.viewers)
}

// PersonTypedAt is when an attached person last typed (zero: never).
func (t *Terminal) PersonTypedAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.personAt
}

// Viewer is one attached person's view of a Terminal: the screen as it
// was when they attached, then the program's output as it comes. Their
// keys go to the program through Type.
type Viewer struct {
	t        *Terminal
	snapshot []byte
	out      chan []byte
	reason   string // why it was detached; guarded by t.mu
	closed   bool   // guarded by t.mu
}

// Attach adds a viewer. Its snapshot and the start of its stream are taken
// in one step, so no output is missed or shown twice.
func (t *Terminal) Attach() (*Viewer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.done:
		return nil, ErrClosed
	default:
	}
	v := &Viewer{t: t, snapshot: t.emu.Render(), out: make(chan []byte, viewerQueue)}
	t.viewers[v] = struct{}{}
	return v, nil
}

// Snapshot is the screen when the viewer attached, as bytes that redraw it
// on a terminal of the same size.
func (v *Viewer) Snapshot() []byte { return v.snapshot }

// Output is the program's output since the snapshot; it closes when the
// viewer is detached (Reason says why).
func (v *Viewer) Output() <-chan []byte { return v.out }

// Reason says why Output closed ("" after Detach).
func (v *Viewer) Reason() string {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	return v.reason
}

// Type writes the person's keys to the program and notes when they typed
// (a terminal agent does not inject input while its person types).
func (v *Viewer) Type(ctx context.Context, b []byte) error {
	v.t.mu.Lock()
	v.t.personAt = time.Now()
	closed := v.closed
	v.t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return v.t.Write(ctx, b)
}

// Resize resizes the terminal to the person's.
func (v *Viewer) Resize(cols, rows int) error { return v.t.Resize(cols, rows) }

// Detach removes the viewer; the program goes on.
func (v *Viewer) Detach() {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	v.t.detachLocked(v, "")
}

func (t *Terminal) detachLocked(v *Viewer, reason string) {
	if v.closed {
		return
	}
	v.closed = true
	v.reason = reason
	delete(t.viewers, v)
	close(v.out)
}
