package enginetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Drive is the few steps an engine's own tests take with one of its
// sessions, each wait bounded by Patience (a real CLI on a busy machine
// is slow, never silent forever).
type Drive struct {
	Patience time.Duration
}

// Input is turn id of one message of the person's to agent "agent" of
// project "p1".
func Input(id troupe.TurnID, text string) engine.Input {
	return engine.Input{Turn: id, Messages: []troupe.Message{{Project: "p1", To: "agent", From: troupe.Person, Kind: troupe.KindMessage, Text: text}}}
}

// Next returns the session's next event, failing after Patience.
func (d Drive) Next(t testing.TB, s engine.Session) (engine.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		return ev, ok
	case <-time.After(d.Patience):
		t.Fatalf("no event after %v", d.Patience)
		return engine.Event{}, false
	}
}

// SessionID reads the EventSession a session reports first.
func (d Drive) SessionID(t testing.TB, s engine.Session) string {
	t.Helper()
	ev, ok := d.Next(t, s)
	if !ok || ev.Kind != engine.EventSession || ev.SessionID == "" {
		t.Fatalf("first event %+v (open %v), want the session's id", ev, ok)
	}
	return ev.SessionID
}

// RunTurn sends Input(id, text) and returns the turn's events and its end.
func (d Drive) RunTurn(t testing.TB, s engine.Session, id troupe.TurnID, text string) ([]engine.Event, engine.Event) {
	t.Helper()
	if err := s.Send(context.Background(), Input(id, text)); err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
	return d.UntilEnd(t, s, id)
}

// UntilEnd reads turn id's events up to its end, which it returns apart.
// An EventSession (the engine's id, which may come again) is kept with the
// turn's events; an event of another turn fails the test.
func (d Drive) UntilEnd(t testing.TB, s engine.Session, id troupe.TurnID) ([]engine.Event, engine.Event) {
	t.Helper()
	var evs []engine.Event
	for {
		ev, ok := d.Next(t, s)
		if !ok {
			t.Fatalf("events closed before turn %s ended: %v", id, s.Err())
		}
		if ev.Kind == engine.EventSession {
			evs = append(evs, ev)
			continue
		}
		if ev.Turn != id {
			t.Fatalf("event %+v of turn %q during turn %s", ev, ev.Turn, id)
		}
		if ev.Kind == engine.EventTurnEnd {
			return evs, ev
		}
		evs = append(evs, ev)
	}
}

// Close closes s, failing the test on an error or after Patience.
func (d Drive) Close(t testing.TB, s engine.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d.Patience)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// Outputs joins the text of the output events of evs.
func Outputs(evs []engine.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == engine.EventOutput {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// Kinds returns the events of evs of kind k.
func Kinds(evs []engine.Event, k engine.EventKind) []engine.Event {
	var out []engine.Event
	for _, ev := range evs {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}
