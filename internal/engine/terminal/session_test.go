package terminal

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeTerm is a terminal whose screen the test sets and whose input it
// records; it has no process, so it runs inside a synctest bubble.
type fakeTerm struct {
	mu       sync.Mutex
	screen   term.Screen
	changed  chan struct{}
	done     chan struct{}
	writes   []string
	personAt time.Time
	closed   bool
}

func newFakeTerm() *fakeTerm {
	return &fakeTerm{changed: make(chan struct{}), done: make(chan struct{}), screen: term.Screen{Lines: []string{""}}}
}

func (f *fakeTerm) show(lines ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.screen = term.Screen{Lines: lines, CursorY: len(lines) - 1}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeTerm) Write(_ context.Context, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, string(b))
	return nil
}

func (f *fakeTerm) Paste(ctx context.Context, text string) error {
	return f.Write(ctx, []byte("PASTE:"+text))
}

func (f *fakeTerm) input() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

func (f *fakeTerm) Screen() term.Screen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.screen
}

func (f *fakeTerm) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeTerm) Done() <-chan struct{} { return f.done }
func (f *fakeTerm) ExitErr() error        { return nil }

func (f *fakeTerm) PersonTypedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.personAt
}

func (f *fakeTerm) typed() {
	f.mu.Lock()
	f.personAt = time.Now()
	f.mu.Unlock()
}

func (f *fakeTerm) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	return nil
}

// screenDriver reads "IDLE", "BUSY" and "DONE <text>" off the last line.
type screenDriver struct{}

func (screenDriver) Observe(s term.Screen) Observation {
	last := s.Lines[len(s.Lines)-1]
	switch {
	case strings.HasPrefix(last, "BUSY"):
		return Observation{State: Busy}
	case strings.HasPrefix(last, "IDLE"), strings.HasPrefix(last, "DONE"):
		return Observation{State: Idle}
	}
	return Observation{State: Starting}
}
func (screenDriver) Submitted(term.Screen) {}
func (screenDriver) TurnEnded(s term.Screen, _ bool) (bool, string, string) {
	last := s.Lines[len(s.Lines)-1]
	if t, ok := strings.CutPrefix(last, "DONE "); ok {
		return true, t, ""
	}
	return false, "", ""
}
func (screenDriver) TakeOutput() []string         { return nil }
func (screenDriver) InterruptKeys() []byte        { return []byte{3} }
func (screenDriver) Quit(context.Context, Writer) {}
func (screenDriver) Poll() time.Duration          { return 0 }

// TestInputWaitsForIdleAndQuietPerson: on fake time, a turn's input is
// never written while the program is busy nor within QuietFor of the
// person's last keystroke; it is pasted at the first moment both hold,
// then Enter follows once the screen shows it.
func TestInputWaitsForIdleAndQuietPerson(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTerm()
		ft.show("BUSY with the person's own request")
		s := NewSession(SessionSpec{Name: "a", Term: ft, Driver: screenDriver{}, QuietFor: 3 * time.Second})
		defer s.Close(context.Background())

		in := engine.Input{Turn: "t1", Messages: []troupe.Message{{From: troupe.Person, Text: "hello"}}}
		if err := s.Send(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // fake time: a busy program gets no input, however long
		synctest.Wait()
		if w := ft.input(); len(w) != 0 {
			t.Fatalf("input written while busy: %q", w)
		}

		ft.typed() // the person types, then the program is idle
		ft.show("IDLE")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if w := ft.input(); len(w) != 0 {
			t.Fatalf("input written 2s after the person typed: %q", w)
		}
		time.Sleep(1500 * time.Millisecond) // past QuietFor (3s)
		synctest.Wait()
		w := ft.input()
		if len(w) != 1 || !strings.HasPrefix(w[0], "PASTE:") || !strings.Contains(w[0], "hello") {
			t.Fatalf("after the quiet period: writes %q, want one paste", w)
		}
		// Enter once the screen shows the pasted text.
		pasted, _, _ := strings.Cut(strings.TrimPrefix(w[0], "PASTE:"), "\n")
		ft.show("IDLE", pasted)
		synctest.Wait()
		if w := ft.input(); len(w) != 2 || w[1] != "\r" {
			t.Fatalf("writes %q, want the paste then Enter", w)
		}
		ft.show("BUSY")
		synctest.Wait()
		ft.show("DONE all good")
		ev := <-s.Events()
		for ev.Kind != engine.EventTurnEnd {
			ev = <-s.Events()
		}
		if ev.Turn != "t1" || ev.Text != "all good" || ev.Error != "" {
			t.Errorf("turn end %+v", ev)
		}
	})
}

// TestInterruptBeforeInput: a turn interrupted before its input was
// written ends at once as interrupted, and nothing is written.
func TestInterruptBeforeInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTerm()
		ft.show("BUSY")
		s := NewSession(SessionSpec{Name: "a", Term: ft, Driver: screenDriver{}})
		defer s.Close(context.Background())
		in := engine.Input{Turn: "t1", Messages: []troupe.Message{{From: troupe.Person, Text: "hello"}}}
		if err := s.Send(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if err := s.Interrupt(context.Background()); err != nil {
			t.Fatal(err)
		}
		ev := <-s.Events()
		if ev.Kind != engine.EventTurnEnd || ev.Error != "interrupted" {
			t.Fatalf("event %+v, want the turn interrupted", ev)
		}
		ft.show("IDLE")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if w := ft.input(); len(w) != 0 {
			t.Errorf("writes after the interrupt: %q", w)
		}
	})
}

// TestSelectKey moves a dialog's marker towards the wanted option,
// whatever the default, numbered or not.
func TestSelectKey(t *testing.T) {
	for name, c := range map[string]struct {
		lines []string
		want  string
	}{
		"default no":    {[]string{" ❯ No, exit", "   Yes, I trust this folder"}, "down"},
		"on it":         {[]string{"   No, exit", " ❯ Yes, I trust this folder"}, "enter"},
		"numbered":      {[]string{" ❯ 1. Yes, I trust this folder", "   2. No, exit"}, "enter"},
		"up":            {[]string{"    Yes", "  ❯ No (recommended)"}, "up"},
		"no such":       {[]string{" ❯ Maybe", "   Never"}, "none"},
		"prompt marker": {[]string{"❯ ", "   Yes, I trust this folder"}, "none"},
	} {
		t.Run(name, func(t *testing.T) {
			option := "Yes, I trust this folder"
			if name == "up" {
				option = "Yes"
			}
			got := "none"
			switch string(selectKey(term.Screen{Lines: c.lines}, option)) {
			case string(keyDown):
				got = "down"
			case string(keyUp):
				got = "up"
			case string(keyEnter):
				got = "enter"
			}
			if got != c.want {
				t.Errorf("selectKey = %s, want %s", got, c.want)
			}
		})
	}
}

// dialogDriver sees a dialog whenever the screen shows "Use this key?",
// to be answered "Yes".
type dialogDriver struct{ screenDriver }

func (dialogDriver) Observe(s term.Screen) Observation {
	if strings.Contains(strings.Join(s.Lines, "\n"), "Use this key?") {
		return Observation{State: Dialog, Choose: "Yes"}
	}
	return screenDriver{}.Observe(s)
}

// TestDialogOneKeyInFlight: on fake time, a TUI slow to take a key gets no
// second one until its screen shows the first taken (two Ups in flight
// would move its marker past the option); a key it dropped is pressed
// again after dialogRetry.
func TestDialogOneKeyInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTerm()
		ft.show("Use this key?", " 1. Yes", "❯ 2. No (recommended)")
		s := NewSession(SessionSpec{Name: "a", Term: ft, Driver: dialogDriver{}})
		defer s.Close(context.Background())
		synctest.Wait()
		if w := ft.input(); len(w) != 1 || w[0] != string(keyUp) {
			t.Fatalf("first key %q, want one Up", w)
		}
		// The TUI has not drawn it for 1.5 s: no key follows.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if w := ft.input(); len(w) != 1 {
			t.Fatalf("keys %q while the first was not taken, want it alone", w)
		}
		// Still nothing past dialogRetry: taken as dropped, pressed again.
		time.Sleep(dialogRetry)
		synctest.Wait()
		if w := ft.input(); len(w) != 2 || w[1] != string(keyUp) {
			t.Fatalf("keys %q after %v without a change, want Up again", w, dialogRetry)
		}
		// Taken: the marker on Yes, then Enter.
		ft.show("Use this key?", "❯ 1. Yes", "  2. No (recommended)")
		time.Sleep(dialogPace)
		synctest.Wait()
		if w := ft.input(); len(w) != 3 || w[2] != string(keyEnter) {
			t.Fatalf("keys %q once the marker is on Yes, want Enter", w)
		}
	})
}

// textDriver is screenDriver typing the messages' text alone (an
// Inputter, as the generic engine is).
type textDriver struct{ screenDriver }

func (textDriver) Input(in engine.Input) string { return in.Messages[0].Text }

// TestInputterPasteOnlyBelowCursor: an Inputter's text has no tag, so the
// same text already on the screen (an earlier turn's input, the program's
// output) does not count as the paste shown: Enter waits until the text
// appears from the cursor's row at the paste down (or pasteSettle).
func TestInputterPasteOnlyBelowCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTerm()
		ft.show("$ echo hi", "hi", "IDLE")
		s := NewSession(SessionSpec{Name: "a", Term: ft, Driver: textDriver{}})
		defer s.Close(context.Background())
		in := engine.Input{Turn: "t1", Messages: []troupe.Message{{From: troupe.Person, Kind: troupe.KindAsk, Text: "echo hi"}}}
		if err := s.Send(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if w := ft.input(); len(w) != 1 || w[0] != "PASTE:echo hi" {
			t.Fatalf("writes %q, want the message's text alone pasted", w)
		}
		ft.show("$ echo hi", "hi", "IDLE") // a redraw: the old "echo hi" is above the cursor
		synctest.Wait()
		if w := ft.input(); len(w) != 1 {
			t.Fatalf("writes %q: Enter pressed on an earlier line's text", w)
		}
		ft.show("$ echo hi", "hi", "IDLE echo hi")
		synctest.Wait()
		if w := ft.input(); len(w) != 2 || w[1] != "\r" {
			t.Fatalf("writes %q, want the paste then Enter", w)
		}
	})
}

// TestDriverWithoutInputGetsRender: a Driver that is no Inputter (Claude
// Code's TUI) is typed engine.Render's text, the turn's tag and headers
// included, as before the generic engine typed the text alone.
func TestDriverWithoutInputGetsRender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := newFakeTerm()
		ft.show("IDLE")
		s := NewSession(SessionSpec{Name: "a", Term: ft, Driver: screenDriver{}})
		defer s.Close(context.Background())
		in := engine.Input{Turn: "t1", Tag: "0123456789abcdef", Messages: []troupe.Message{{From: "lead", Kind: troupe.KindAsk, Request: "r1", Text: "hello"}}}
		if err := s.Send(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if w := ft.input(); len(w) != 1 || w[0] != "PASTE:"+engine.Render(in) || !strings.HasPrefix(w[0], "PASTE:"+engine.HeaderPrefix(in.Tag)) {
			t.Fatalf("writes %q, want engine.Render's text", w)
		}
	})
}
