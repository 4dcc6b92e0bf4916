// Package enginetest is the contract suite every engine.Session passes: it
// checks the promises of the Session doc (one EventTurnEnd per Send, with
// its turn id; Send during a turn fails; Err after a death, nil after Close;
// Close concurrent with everything, more than once, unblocking Events;
// Interrupt ending the turn as "interrupted"; the activity token advancing
// on output, C3).
//
// An engine's tests call Run with a Harness that starts sessions of that
// engine whose turns follow a script (answer, hang until interrupted, die).
// The fake engine scripts them with directives in the messages; a real
// engine with its fake model server.
//
// The suite relies only on engine.EventOutput and engine.EventTurnEnd and
// on an Event's Turn, Text and Error; events of other kinds are ignored.
//
// Concurrency: Run runs its cases as parallel subtests, each with its own
// sessions; a case's goroutines end before the case does. Who may import:
// tests of engine packages only.
package enginetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// DefaultPatience bounds each wait of the suite when Harness.Patience is
// zero.
const DefaultPatience = 30 * time.Second

// TurnKind says what a scripted turn does.
type TurnKind int

// The kinds of scripted turns. Each outputs Turn.Text first (at least one
// EventOutput whose text contains it), then:
const (
	// Answer ends the turn normally; the turn end's Text contains Text.
	Answer TurnKind = iota + 1
	// Hang keeps the turn running until it is interrupted or the session
	// closed.
	Hang
	// Die makes the engine's process die mid-turn (a non-zero exit, as a
	// crash), without a protocol end of turn.
	Die
)

func (k TurnKind) String() string {
	switch k {
	case Answer:
		return "answer"
	case Hang:
		return "hang"
	case Die:
		return "die"
	}
	return fmt.Sprintf("TurnKind(%d)", int(k))
}

// Turn is one scripted turn.
type Turn struct {
	Kind TurnKind
	Text string // never empty
}

// Harness is how the suite drives the engine under test.
type Harness struct {
	// Start starts a session ready for Send whose turns follow script, in
	// the order they are sent (a refused Send does not count). The suite
	// closes every session it gets at the end of its case; Start may
	// register its own cleanup too (Close may be called more than once).
	// Required.
	Start func(t *testing.T, script []Turn) engine.Session
	// Message is the text of the message the suite sends to start turn
	// (which may carry the turn's script, as the fake engine's directives
	// do). Nil sends "please do your next task".
	Message func(turn Turn) string
	// Patience bounds every wait of the suite; reaching it is a failure (a
	// hang), never a pace the suite relies on. Zero means DefaultPatience.
	Patience time.Duration
}

// Run runs the contract suite against the harness's engine.
func Run(t *testing.T, h Harness) {
	if h.Start == nil {
		t.Fatal("enginetest: Harness.Start is required")
	}
	if h.Patience <= 0 {
		h.Patience = DefaultPatience
	}
	cases := []struct {
		name string
		run  func(t *testing.T, h *Harness)
	}{
		{"C7OneTurnEndPerSend", testOneTurnEndPerSend},
		{"C3ActivityAdvancesOnOutput", testActivityAdvancesOnOutput},
		{"SendDuringTurnFails", testSendDuringTurnFails},
		{"InterruptEndsTurnAsInterrupted", testInterrupt},
		{"DeathClosesEventsWithErr", testDeath},
		{"CloseEndsSessionWithoutErr", testClose},
		{"CloseUnblocksEventsMidTurn", testCloseUnblocksEvents},
		{"CloseConcurrentWithEverything", testCloseConcurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &h)
		})
	}
}

// start starts a session and closes it at the end of the test.
func (h *Harness) start(t *testing.T, script ...Turn) engine.Session {
	t.Helper()
	s := h.Start(t, script)
	if s == nil {
		t.Fatal("Harness.Start returned no session")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.Patience)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close at the end of the test: %v", err)
		}
	})
	return s
}

func (h *Harness) input(id troupe.TurnID, turn Turn) engine.Input {
	text := "please do your next task"
	if h.Message != nil {
		text = h.Message(turn)
	}
	return engine.Input{Turn: id, Messages: []troupe.Message{{
		Project: "enginetest", To: "agent", From: troupe.Person, Kind: troupe.KindMessage, Text: text,
	}}}
}

func (h *Harness) send(t *testing.T, s engine.Session, id troupe.TurnID, turn Turn) {
	t.Helper()
	if err := s.Send(context.Background(), h.input(id, turn)); err != nil {
		t.Fatalf("send turn %s: %v", id, err)
	}
}

// next returns the session's next event of a kind the suite knows, or
// false when Events is closed.
func (h *Harness) next(t *testing.T, s engine.Session) (engine.Event, bool) {
	t.Helper()
	timer := time.NewTimer(h.Patience)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return ev, false
			}
			if ev.Kind == engine.EventOutput || ev.Kind == engine.EventTurnEnd {
				return ev, true
			}
		case <-timer.C:
			t.Fatalf("no event after %v", h.Patience)
			return engine.Event{}, false
		}
	}
}

// untilOutput reads events of turn id until an output containing text.
func (h *Harness) untilOutput(t *testing.T, s engine.Session, id troupe.TurnID, text string) {
	t.Helper()
	for {
		ev, ok := h.next(t, s)
		if !ok {
			t.Fatalf("events closed before turn %s said %q: Err %v", id, text, s.Err())
		}
		checkTurn(t, ev, id)
		if ev.Kind == engine.EventTurnEnd {
			t.Fatalf("turn %s ended %+v before it said %q", id, ev, text)
		}
		if strings.Contains(ev.Text, text) {
			return
		}
	}
}

// untilEnd reads events of turn id until its end, which it returns with the
// texts of the outputs before it.
func (h *Harness) untilEnd(t *testing.T, s engine.Session, id troupe.TurnID) ([]string, engine.Event) {
	t.Helper()
	var outputs []string
	for {
		ev, ok := h.next(t, s)
		if !ok {
			t.Fatalf("events closed before turn %s ended: Err %v", id, s.Err())
		}
		checkTurn(t, ev, id)
		if ev.Kind == engine.EventTurnEnd {
			return outputs, ev
		}
		outputs = append(outputs, ev.Text)
	}
}

// drain reads Events until it is closed and returns the turn ends seen.
func (h *Harness) drain(t *testing.T, s engine.Session) []engine.Event {
	t.Helper()
	var ends []engine.Event
	for {
		ev, ok := h.next(t, s)
		if !ok {
			return ends
		}
		if ev.Kind == engine.EventTurnEnd {
			ends = append(ends, ev)
		}
	}
}

func (h *Harness) close(t *testing.T, s engine.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.Patience)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func checkTurn(t *testing.T, ev engine.Event, id troupe.TurnID) {
	t.Helper()
	if ev.Turn != id {
		t.Fatalf("%s event %+v has turn %q, want %q", ev.Kind, ev, ev.Turn, id)
	}
}

// Each Send gets exactly one EventTurnEnd, carrying its turn id and the
// turn's final output; nothing of a turn comes after its end.
func testOneTurnEndPerSend(t *testing.T, h *Harness) {
	script := []Turn{{Answer, "alpha answer"}, {Answer, "beta answer"}, {Answer, "gamma answer"}}
	s := h.start(t, script...)
	for i, turn := range script {
		id := troupe.TurnID(fmt.Sprintf("turn-%d", i+1))
		h.send(t, s, id, turn)
		outputs, end := h.untilEnd(t, s, id)
		if end.Error != "" || !strings.Contains(end.Text, turn.Text) {
			t.Errorf("turn %s ended with text %q, error %q; want its final output (containing %q) and no error", id, end.Text, end.Error, turn.Text)
		}
		if !containsText(outputs, turn.Text) {
			t.Errorf("turn %s output %q, want an output containing %q", id, outputs, turn.Text)
		}
	}
	// A second end of a turn would have shown up in the next turn's events;
	// for the last one, in what is left after Close.
	h.close(t, s)
	if ends := h.drain(t, s); len(ends) != 0 {
		t.Errorf("turn ends after the last turn ended: %+v", ends)
	}
}

func containsText(outputs []string, text string) bool {
	for _, o := range outputs {
		if strings.Contains(o, text) {
			return true
		}
	}
	return false
}

// The activity token (C3) has advanced since the turn started, with its
// time set, by the time an output event is delivered, and never goes back.
// (One chunk of output may carry several events, so it need not advance
// between two of them.)
func testActivityAdvancesOnOutput(t *testing.T, h *Harness) {
	script := []Turn{{Answer, "some output"}, {Answer, "more output"}}
	s := h.start(t, script...)
	last := s.Activity()
	for i, turn := range script {
		id := troupe.TurnID(fmt.Sprintf("turn-%d", i+1))
		before := s.Activity()
		h.send(t, s, id, turn)
		for {
			ev, ok := h.next(t, s)
			if !ok {
				t.Fatalf("events closed before turn %s ended: Err %v", id, s.Err())
			}
			checkTurn(t, ev, id)
			now := s.Activity()
			if now.Count < last.Count || now.At.Before(last.At) {
				t.Fatalf("activity went back from %+v to %+v", last, now)
			}
			if ev.Kind == engine.EventOutput && (now.Count <= before.Count || now.At.IsZero()) {
				t.Fatalf("activity %+v when output %q of turn %s was delivered, %+v before the turn: it must advance on output", now, ev.Text, id, before)
			}
			last = now
			if ev.Kind == engine.EventTurnEnd {
				break
			}
		}
	}
}

// Send while a turn runs fails and does not disturb the running turn; the
// session takes the next turn once it ended.
func testSendDuringTurnFails(t *testing.T, h *Harness) {
	s := h.start(t, Turn{Hang, "working on it"}, Turn{Answer, "next one"})
	h.send(t, s, "t1", Turn{Hang, "working on it"})
	// Refused at once, before the turn said anything...
	if err := s.Send(context.Background(), h.input("t2", Turn{Answer, "next one"})); err == nil {
		t.Error("send of turn t2 while turn t1 runs: no error")
	}
	h.untilOutput(t, s, "t1", "working on it")
	// ...and while it works.
	if err := s.Send(context.Background(), h.input("t2", Turn{Answer, "next one"})); err == nil {
		t.Error("send of turn t2 while turn t1 works: no error")
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	if _, end := h.untilEnd(t, s, "t1"); end.Error != "interrupted" {
		t.Fatalf("turn t1 ended %+v, want error interrupted", end)
	}
	h.send(t, s, "t3", Turn{Answer, "next one"})
	if _, end := h.untilEnd(t, s, "t3"); end.Error != "" || !strings.Contains(end.Text, "next one") {
		t.Errorf("turn t3 after the refused one ended %+v", end)
	}
}

// Interrupt returns without waiting; the running turn then ends with one
// EventTurnEnd whose Error is "interrupted", and the session works on.
func testInterrupt(t *testing.T, h *Harness) {
	s := h.start(t, Turn{Hang, "first hang"}, Turn{Hang, "second hang"}, Turn{Answer, "still here"})
	for i, turn := range []Turn{{Hang, "first hang"}, {Hang, "second hang"}} {
		id := troupe.TurnID(fmt.Sprintf("hang-%d", i+1))
		h.send(t, s, id, turn)
		h.untilOutput(t, s, id, turn.Text)
		if err := s.Interrupt(context.Background()); err != nil {
			t.Fatalf("interrupt turn %s: %v", id, err)
		}
		if _, end := h.untilEnd(t, s, id); end.Error != "interrupted" {
			t.Fatalf("turn %s ended %+v, want error interrupted", id, end)
		}
	}
	h.send(t, s, "after", Turn{Answer, "still here"})
	if _, end := h.untilEnd(t, s, "after"); end.Error != "" || !strings.Contains(end.Text, "still here") {
		t.Errorf("turn after the interrupts ended %+v", end)
	}
}

// A process that dies mid-turn sends no turn end: Events closes and Err
// says why, and keeps saying it after Close; Send then fails.
func testDeath(t *testing.T, h *Harness) {
	s := h.start(t, Turn{Die, "about to die"})
	if err := s.Err(); err != nil {
		t.Errorf("Err of a running session = %v", err)
	}
	h.send(t, s, "t1", Turn{Die, "about to die"})
	h.untilOutput(t, s, "t1", "about to die")
	if ends := h.drain(t, s); len(ends) != 0 {
		t.Errorf("turn end after the process died: %+v", ends)
	}
	died := s.Err()
	if died == nil {
		t.Fatal("Err = nil after the process died")
	}
	if err := s.Send(context.Background(), h.input("t2", Turn{Answer, "too late"})); err == nil {
		t.Error("send after the process died: no error")
	}
	h.close(t, s)
	if err := s.Err(); err == nil {
		t.Errorf("Err after Close lost the reason of the death (%v)", died)
	}
}

// Close ends an idle session: Events closes without a turn end, Err is
// nil, Send fails, and Close again is harmless.
func testClose(t *testing.T, h *Harness) {
	s := h.start(t, Turn{Answer, "before close"})
	h.send(t, s, "t1", Turn{Answer, "before close"})
	h.untilEnd(t, s, "t1")
	h.close(t, s)
	if ends := h.drain(t, s); len(ends) != 0 {
		t.Errorf("turn ends after Close: %+v", ends)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	if err := s.Send(context.Background(), h.input("t2", Turn{Answer, "after close"})); err == nil {
		t.Error("send after Close: no error")
	}
	h.close(t, s)
	if err := s.Err(); err != nil {
		t.Errorf("Err after a second Close = %v, want nil", err)
	}
}

// Close mid-turn unblocks a reader waiting on Events.
func testCloseUnblocksEvents(t *testing.T, h *Harness) {
	s := h.start(t, Turn{Hang, "busy forever"})
	h.send(t, s, "t1", Turn{Hang, "busy forever"})
	h.untilOutput(t, s, "t1", "busy forever")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for range s.Events() {
		}
	}()
	h.close(t, s)
	select {
	case <-closed:
	case <-time.After(h.Patience):
		t.Fatalf("a reader of Events still blocked %v after Close", h.Patience)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
}

// Close races Send, Interrupt, Activity, Err, Events and another Close
// (run with -race); every call returns, Events closes, Err is nil.
func testCloseConcurrent(t *testing.T, h *Harness) {
	const senders = 4
	script := []Turn{{Hang, "racing"}}
	for range senders {
		script = append(script, Turn{Answer, "raced"})
	}
	s := h.start(t, script...)
	h.send(t, s, "t0", script[0])
	h.untilOutput(t, s, "t0", "racing")

	var wg sync.WaitGroup
	start := make(chan struct{})
	ctx := context.Background()
	wg.Go(func() { // the consumer
		<-start
		for range s.Events() {
		}
	})
	for i := range senders {
		wg.Go(func() {
			<-start
			s.Send(ctx, h.input(troupe.TurnID(fmt.Sprintf("t%d", i+1)), script[i+1])) // may fail: a turn runs, or the session closed
		})
	}
	wg.Go(func() {
		<-start
		s.Interrupt(ctx) // may fail once closed
	})
	wg.Go(func() {
		<-start
		for range 100 {
			s.Activity()
			s.Err()
		}
	})
	for range 2 {
		wg.Go(func() {
			<-start
			cctx, cancel := context.WithTimeout(ctx, h.Patience)
			defer cancel()
			if err := s.Close(cctx); err != nil {
				t.Errorf("concurrent close: %v", err)
			}
		})
	}
	close(start)
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(h.Patience):
		t.Fatalf("calls racing Close still blocked after %v", h.Patience)
	}
	if _, ok := <-s.Events(); ok {
		t.Error("Events open after Close returned")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
}
