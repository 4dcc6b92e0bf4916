package terminal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultQuietFor is how long after an attached person's last keystroke
// troupe waits before it writes a queued turn's input.
const DefaultQuietFor = 3 * time.Second

// pasteSettle bounds the wait between a paste and its Enter for the screen
// to show the pasted text.
const pasteSettle = 2 * time.Second

// blockedRefresh is how often at most a blocked session reports its
// screen again while it changes.
const blockedRefresh = time.Second

// maxDialogSteps bounds the keys pressed to reach one dialog's option.
const maxDialogSteps = 12

// dialogPace is the least time between two keys answering a dialog: a
// TUI that draws the moved marker may not have taken the move yet (Claude
// Code's trust dialog, given Down then Enter at once, exits "not
// trusted").
const dialogPace = 400 * time.Millisecond

// dialogRetry is how long a key answering a dialog may go without the
// screen changing before it is taken as dropped and pressed again.
const dialogRetry = 2 * time.Second

// State is what a program is doing, as a Driver reads it.
type State int

// States.
const (
	Starting State = iota // not ready for input yet, no dialog shown
	Idle                  // ready for input
	Busy                  // working on a turn
	Dialog                // a dialog the driver knows: Observation.Choose or Keys answers it
	Blocked               // waits on the person (a dialog it does not know): Observation.Why
)

// Observation is a Driver's reading of the program's state.
type Observation struct {
	State State
	// Choose, for Dialog: the text of the option to select. The session
	// moves the dialog's ❯ marker to the row holding it, then presses
	// Enter, whatever the dialog's default.
	Choose string
	// Keys, for Dialog when Choose is empty: what to press.
	Keys []byte
	// Why, for Blocked: what the program waits for.
	Why string
}

// Driver knows one terminal program. The session calls its methods from
// one goroutine (its loop), except Quit, which Close calls.
type Driver interface {
	// Observe reads the program's state from its screen and the driver's
	// own sources.
	Observe(s term.Screen) Observation
	// Submitted is called just before the Enter that submits a turn's
	// input (the pasted text is on the screen s).
	Submitted(s term.Screen)
	// TurnEnded reports whether the submitted turn has ended, with its
	// final text, or why it failed. interrupting: the session sent the
	// interrupt keys.
	TurnEnded(s term.Screen, interrupting bool) (ended bool, text, failure string)
	// TakeOutput returns what the agent wrote since the last call, in
	// chunks, while its turn runs (nil when the driver reads no output
	// before the turn ends: the turn's final text is then its output).
	TakeOutput() []string
	// InterruptKeys stop a running turn (Esc for Claude Code).
	InterruptKeys() []byte
	// Quit asks the program to exit its own way (/exit, Ctrl-D) before
	// the escalation; it returns at once.
	Quit(ctx context.Context, w Writer)
	// Poll is how often the session asks again without new output (the
	// driver reads files); 0: only when the program writes.
	Poll() time.Duration
}

// EventDriver is a Driver that also reads, from its own sources, the
// agent's tool calls and the limit a turn ended on (Claude Code's
// transcript): the session emits the events with the turn's id (a call in
// flight is activity, C3) and puts the limit on the turn's end.
type EventDriver interface {
	// TakeEvents returns the EventToolCall and EventToolResult events seen
	// since the last call.
	TakeEvents() []engine.Event
	// TurnLimit is the usage or rate limit the ended turn hit; nil when
	// none.
	TurnLimit() *engine.Limit
}

// Inputter is a Driver that writes a turn's input its own way, not as
// engine.Render's framing (the generic engine: the messages' text, or the
// agent's template). Its text has no tag that only troupe could have put
// on the screen, so the session looks for the pasted text only from the
// cursor's row at the paste down: nothing on the screen before the paste
// (an earlier turn's input, the program's output) can pass for it, and
// the turn's answer starts below the input it really typed.
type Inputter interface {
	Input(in engine.Input) string
}

// Writer writes the program's input.
type Writer interface {
	Write(ctx context.Context, b []byte) error
}

// Term is what a Session needs of a terminal: *term.Terminal, or a fake
// in tests.
type Term interface {
	Writer
	Paste(ctx context.Context, text string) error
	Screen() term.Screen
	Changed() <-chan struct{}
	Done() <-chan struct{}
	ExitErr() error
	PersonTypedAt() time.Time
	Close(ctx context.Context) error
}

// SessionSpec starts a Session.
type SessionSpec struct {
	Name   string // the agent, for messages
	Term   Term
	Driver Driver
	Logger *slog.Logger
	// QuietFor: see DefaultQuietFor (zero means it).
	QuietFor time.Duration
	// Attach is the terminal a person attaches to; nil: none.
	Attach engine.Terminal
	// Cleanup runs once the session ended (remove its files).
	Cleanup func()
}

// Session is a terminal agent's session.
type Session struct {
	*engine.SessionCore
	name    string
	t       Term
	d       Driver
	log     *slog.Logger
	quiet   time.Duration
	attach  engine.Terminal
	cleanup func()

	kick chan struct{} // a Send or an Interrupt: look again

	// Guarded by SessionCore.Mu.
	pending      *engine.Input // accepted, its input not written yet
	interruptReq bool          // Interrupt called for the running turn

	loopDone chan struct{}
}

var (
	_ engine.Session         = (*Session)(nil)
	_ engine.TerminalSession = (*Session)(nil)
)

// NewSession starts the session's loop on spec.Term.
func NewSession(spec SessionSpec) *Session {
	s := &Session{
		SessionCore: engine.NewSessionCore(64),
		name:        spec.Name,
		t:           spec.Term,
		d:           spec.Driver,
		log:         spec.Logger,
		quiet:       spec.QuietFor,
		attach:      spec.Attach,
		cleanup:     spec.Cleanup,
		kick:        make(chan struct{}, 1),
		loopDone:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.quiet <= 0 {
		s.quiet = DefaultQuietFor
	}
	if a, ok := spec.Driver.(interface{ SetBump(func()) }); ok {
		a.SetBump(s.Bump) // what the driver reads is activity too
	}
	go s.loop()
	go s.watch()
	return s
}

// ExitErr is the program's exit error (nil: status 0) once the session
// ended; it blocks until the program is gone.
func (s *Session) ExitErr() error {
	<-s.t.Done()
	return s.t.ExitErr()
}

// Terminal implements engine.TerminalSession.
func (s *Session) Terminal() engine.Terminal { return s.attach }

// watch ends the session when the program is gone.
func (s *Session) watch() {
	<-s.t.Done()
	last := lastLines(s.t.Screen().Text(), 5)
	s.Finish(func() error {
		err := s.t.ExitErr()
		if err == nil {
			err = errors.New("the program exited")
		}
		if last != "" {
			return fmt.Errorf("%w; its screen ended with: %s", err, last)
		}
		return err
	}, func() {
		<-s.loopDone
		if s.cleanup != nil {
			s.cleanup()
		}
	})
}

// Send implements engine.Session: the turn is accepted at once and its
// input written at the program's next idle moment.
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	if in.Tag == "" { // the text is rendered more than once: one tag
		in.Tag = engine.NewTag(in.Messages)
	}
	_, err := s.BeginTurn(ctx, in, func() error {
		s.pending = &in
		s.interruptReq = false
		return nil
	})
	if err != nil {
		return err
	}
	s.poke()
	return nil
}

// Interrupt implements engine.Session: a turn whose input is not written
// yet ends at once; a running one gets the driver's interrupt keys.
func (s *Session) Interrupt(ctx context.Context) error {
	s.Mu.Lock()
	turn, _ := s.TurnLocked()
	if turn == "" {
		s.Mu.Unlock()
		return fmt.Errorf("interrupt %s: no turn running: %w", s.name, troupe.ErrConflict)
	}
	s.interruptReq = true
	s.Mu.Unlock()
	s.poke()
	return nil
}

func (s *Session) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Close implements engine.Session: the program's own quit, then the
// escalation.
func (s *Session) Close(ctx context.Context) error {
	return s.Shutdown(ctx, "close terminal agent "+s.name, func(ctx context.Context) {
		select {
		case <-s.t.Done():
		default:
			s.d.Quit(ctx, s.t)
		}
		if err := s.t.Close(ctx); err != nil {
			s.log.Warn("close terminal", "err", err)
		}
	})
}

// loopState is the loop's own state.
type loopState struct {
	submitted     troupe.TurnID // the turn whose input was submitted
	interrupting  bool          // interrupt keys were sent for it
	pasted        bool          // the pending input is pasted, Enter not yet
	pastedAt      time.Time
	pastedText    string    // what was pasted
	pastedRow     int       // an Inputter's: the cursor's row (Screen.All's) at the paste; -1: the whole screen
	blocked       string    // the reason last reported with EventBlocked
	blockedScreen string    // the screen's text then
	blockedAt     time.Time // when
	dialogSteps   int
	lastDialog    string
	lastKeyAt     time.Time // the last key answering a dialog
	keyScreen     string    // the screen's text when it was pressed
	outputs       int       // output events of the submitted turn
	shown         string    // the screen's text less its animation, when last read (activity)
}

// loop reads the screen after every change, poll, Send or Interrupt and
// acts.
func (s *Session) loop() {
	defer close(s.loopDone)
	ctx := s.Context()
	var ls loopState
	var poll <-chan time.Time
	if p := s.d.Poll(); p > 0 {
		tk := time.NewTicker(p)
		defer tk.Stop()
		poll = tk.C
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		changed := s.t.Changed()
		if wait := s.step(ctx, &ls); wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.t.Done():
			// What the program wrote before it died is still the turn's
			// output (no turn end is invented: Events just closes).
			if ls.submitted != "" {
				s.d.Observe(s.t.Screen())
				for _, out := range s.d.TakeOutput() {
					s.Emit(engine.Event{Kind: engine.EventOutput, Turn: ls.submitted, Text: out})
				}
			}
			return
		case <-changed:
		case <-poll:
		case <-s.kick:
		case <-timer.C:
		}
	}
}

// step acts once on what the screen shows; it returns how long to wait at
// most before looking again (0: until something happens).
func (s *Session) step(ctx context.Context, ls *loopState) time.Duration {
	scr := s.t.Screen()
	// Activity (C3) is the screen's text changing, not its animation: a
	// spinner turning or an elapsed-time counter counting is what a hung
	// program shows too.
	if shown := withoutAnimation(scr.Text()); shown != ls.shown {
		ls.shown = shown
		s.Bump()
	}
	obs := s.d.Observe(scr)

	switch obs.State {
	case Dialog:
		return s.answerDialog(ctx, ls, scr, obs)
	case Blocked:
		// Reported at once, then again while the screen changes (a dialog
		// is often drawn a moment after the program says it waits), at
		// most every blockedRefresh: the person sees what it asks.
		text := scr.Text()
		switch {
		case ls.blocked != obs.Why:
		case text == ls.blockedScreen:
			return s.turnStep(ctx, ls, scr, obs)
		case time.Since(ls.blockedAt) < blockedRefresh:
			return minWait(blockedRefresh-time.Since(ls.blockedAt), s.turnStep(ctx, ls, scr, obs))
		}
		ls.blocked, ls.blockedScreen, ls.blockedAt = obs.Why, text, time.Now()
		s.Emit(engine.Event{Kind: engine.EventBlocked, Turn: s.CurrentTurn(),
			Text: fmt.Sprintf("%s; attach to answer it (troupe attach %s). The screen:\n%s", obs.Why, s.name, text)})
	default:
		ls.lastDialog, ls.dialogSteps = "", 0
		if ls.blocked != "" {
			ls.blocked, ls.blockedScreen = "", ""
			s.Emit(engine.Event{Kind: engine.EventBlocked, Turn: s.CurrentTurn()})
		}
	}

	return s.turnStep(ctx, ls, scr, obs)
}

// minWait is the shorter of two waits, 0 meaning none.
func minWait(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// turnStep moves the running turn on: its input written when the moment
// is right, its output taken, its interrupt sent, its end reported.
func (s *Session) turnStep(ctx context.Context, ls *loopState, scr term.Screen, obs Observation) time.Duration {
	s.Mu.Lock()
	turn, _ := s.TurnLocked()
	pending, interrupt := s.pending, s.interruptReq
	s.Mu.Unlock()
	if turn == "" {
		ls.submitted, ls.interrupting, ls.pasted = "", false, false
		return 0
	}

	// A turn whose input is not written yet: an interrupt ends it here.
	if pending != nil && ls.submitted != turn && interrupt {
		if ls.pasted {
			// Clear what was pasted but not submitted (Ctrl-U: the
			// line's start).
			_ = s.t.Write(ctx, []byte{0x15})
		}
		ls.pasted = false
		s.endTurn(turn, "", "interrupted")
		return 0
	}

	if ls.submitted == turn {
		s.drain(turn, ls)
		if interrupt && !ls.interrupting {
			ls.interrupting = true
			if err := s.t.Write(ctx, s.d.InterruptKeys()); err != nil {
				s.log.Warn("write interrupt keys", "err", err)
			}
		}
		ended, text, failure := s.d.TurnEnded(scr, ls.interrupting)
		if !ended {
			return 0
		}
		if ls.interrupting && failure == "" {
			failure = "interrupted"
		}
		s.drain(turn, ls)
		if ls.outputs == 0 && text != "" && failure == "" {
			s.Emit(engine.Event{Kind: engine.EventOutput, Turn: turn, Text: text})
		}
		ls.submitted, ls.interrupting, ls.outputs = "", false, 0
		s.endTurn(turn, text, failure)
		return 0
	}

	if pending == nil {
		return 0
	}
	if ls.pasted {
		// It was pasted at an idle moment; its echo may hide the prompt.
		// Enter once the screen shows the paste (or after pasteSettle).
		if time.Since(ls.pastedAt) < pasteSettle && !pasteShown(scr, ls.pastedText, ls.pastedRow) {
			return pasteSettle - time.Since(ls.pastedAt)
		}
		s.d.Submitted(scr)
		if err := s.t.Write(ctx, []byte("\r")); err != nil {
			s.log.Warn("write enter", "err", err)
			return 0
		}
		ls.pasted = false
		ls.submitted, ls.outputs = turn, 0
		s.Mu.Lock()
		s.pending = nil
		s.Mu.Unlock()
		return 0
	}
	if obs.State != Idle {
		return 0
	}
	// Never while the person types.
	if at := s.t.PersonTypedAt(); !at.IsZero() {
		if left := s.quiet - time.Since(at); left > 0 {
			return left
		}
	}
	text, row := engine.Render(*pending), -1
	if in, ok := s.d.(Inputter); ok {
		text, row = in.Input(*pending), len(scr.Scrollback)+scr.CursorY
	}
	if err := s.t.Paste(ctx, text); err != nil {
		s.log.Warn("paste input", "err", err)
		return 0
	}
	ls.pasted, ls.pastedAt, ls.pastedText, ls.pastedRow = true, time.Now(), text, row
	return pasteSettle
}

// pasteShown reports whether the screen shows the start of the pasted
// input: anywhere on it when from < 0 (engine.Render's text, whose first
// line holds the turn's random tag; or Claude Code's "[Pasted text"
// stand-in for a long paste), else on its rows (Screen.All's) from row
// from down.
func pasteShown(scr term.Screen, input string, from int) bool {
	text := scr.Text()
	if from >= 0 {
		lines := strings.Split(scr.All(), "\n")
		text = strings.Join(lines[min(from, len(lines)):], "\n")
	} else if strings.Contains(text, "[Pasted text") {
		return true
	}
	first := strings.TrimSpace(term.PasteSafe(input))
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if r := []rune(first); len(r) > 24 {
		first = string(r[:24])
	}
	return first != "" && term.Contains(text, first)
}

// drain emits what the driver read of turn since the last look: its
// output, then (an EventDriver) its tool calls and results.
func (s *Session) drain(turn troupe.TurnID, ls *loopState) {
	for _, out := range s.d.TakeOutput() {
		ls.outputs++
		s.Emit(engine.Event{Kind: engine.EventOutput, Turn: turn, Text: out})
	}
	if ed, ok := s.d.(EventDriver); ok {
		for _, ev := range ed.TakeEvents() {
			ev.Turn = turn
			s.Emit(ev)
		}
	}
}

// endTurn ends the running turn turn with its text or failure (and the
// limit it hit, an EventDriver's).
func (s *Session) endTurn(turn troupe.TurnID, text, failure string) {
	s.Mu.Lock()
	cur, _ := s.TurnLocked()
	if cur != turn {
		s.Mu.Unlock()
		return
	}
	s.pending = nil
	s.interruptReq = false
	s.EndTurnLocked()
	s.Mu.Unlock()
	ev := engine.Event{Kind: engine.EventTurnEnd, Turn: turn, Text: text, Error: failure}
	if ed, ok := s.d.(EventDriver); ok && failure != "" && failure != "interrupted" {
		ev.Limit = ed.TurnLimit()
	}
	s.Emit(ev)
}

// answerDialog moves the dialog's ❯ marker one row towards the option to
// choose, or presses Enter once it is on it: one key per step, each step
// after the screen changed. A dialog it cannot answer after
// maxDialogSteps keys is reported blocked.
func (s *Session) answerDialog(ctx context.Context, ls *loopState, scr term.Screen, obs Observation) time.Duration {
	if wait := dialogPace - time.Since(ls.lastKeyAt); wait > 0 {
		return wait
	}
	// One key in flight: until the screen shows the last key taken, none
	// follows (a slow TUI given a second Up before it drew the first
	// would move past the option); a key it dropped is pressed again
	// after dialogRetry.
	if scr.Text() == ls.keyScreen {
		if wait := dialogRetry - time.Since(ls.lastKeyAt); wait > 0 {
			return wait
		}
	}
	key := obs.Keys
	if obs.Choose != "" {
		key = selectKey(scr, obs.Choose)
	}
	id := obs.Choose + string(obs.Keys)
	if ls.lastDialog != id {
		ls.lastDialog, ls.dialogSteps = id, 0
	}
	ls.dialogSteps++
	if key == nil || ls.dialogSteps > maxDialogSteps {
		why := fmt.Sprintf("a dialog troupe could not answer (wanted option %q)", obs.Choose)
		if ls.blocked != why {
			ls.blocked = why
			s.Emit(engine.Event{Kind: engine.EventBlocked, Turn: s.CurrentTurn(),
				Text: fmt.Sprintf("%s; attach to answer it (troupe attach %s). The screen:\n%s", why, s.name, scr.Text())})
		}
		return 0
	}
	s.log.Debug("answering a dialog", "choose", obs.Choose, "key", fmt.Sprintf("%q", key))
	if err := s.t.Write(ctx, key); err != nil {
		s.log.Warn("answer dialog", "err", err)
	}
	ls.lastKeyAt, ls.keyScreen = time.Now(), scr.Text()
	return dialogPace
}

// Keys of a dialog.
var (
	keyUp    = []byte("\x1b[A")
	keyDown  = []byte("\x1b[B")
	keyEnter = []byte("\r")
)

// selectKey is the key that brings the ❯ marker of a dialog on scr closer
// to the row showing option (Enter when it is there); nil when the screen
// shows no marker or no such option.
func selectKey(scr term.Screen, option string) []byte {
	want, cur := -1, -1
	norm := term.Normalize(option)
	for y, line := range scr.Lines {
		l := strings.TrimSpace(line)
		marked := strings.HasPrefix(l, "❯")
		body := term.Normalize(strings.TrimPrefix(l, "❯"))
		// Options may be numbered ("1. Yes, I trust this folder").
		if i := strings.IndexByte(body, '.'); i > 0 && i <= 3 && isDigits(body[:i]) {
			body = body[i+1:]
		}
		if body == norm && want < 0 {
			want = y
		}
		if marked && cur < 0 && body != "" && !strings.HasPrefix(body, "/") {
			cur = y
		}
	}
	switch {
	case want < 0 || cur < 0:
		return nil
	case want == cur:
		return keyEnter
	case want > cur:
		return keyDown
	default:
		return keyUp
	}
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// lastLines is the last n non-blank lines of text, joined by " / ".
func lastLines(text string, n int) string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append([]string{l}, out...)
		}
	}
	return strings.Join(out, " / ")
}
