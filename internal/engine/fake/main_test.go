package fake

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMain(m *testing.M) {
	MaybeRunChild()
	os.Exit(m.Run())
}

// patience bounds every wait on a session's events: reaching it is a
// failure (a hang), not a pace the tests rely on.
const patience = 30 * time.Second

// startAgent starts a fake agent from the test binary and closes it at the
// end of the test. Zero fields of o and spec get test defaults.
func startAgent(t testing.TB, o Options, spec engine.StartSpec) *Session {
	t.Helper()
	if o.Command == nil {
		o.Command = TestCommand()
	}
	if spec.Key == (troupe.RuntimeKey{}) {
		spec.Key = troupe.RuntimeKey{Project: "p1", Agent: "a"}
	}
	if spec.Agent.Name == "" {
		spec.Agent.Name = spec.Key.Agent
		spec.Agent.Engine = troupe.EngineFake
	}
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	sess, err := New(o).Start(ctx, spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	s := sess.(*Session)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func msg(text string) troupe.Message {
	return troupe.Message{Project: "p1", To: "a", From: troupe.Person, Kind: troupe.KindMessage, Text: text}
}

func send(t testing.TB, s *Session, turn troupe.TurnID, texts ...string) {
	t.Helper()
	in := engine.Input{Turn: turn}
	for _, text := range texts {
		in.Messages = append(in.Messages, msg(text))
	}
	if err := s.Send(context.Background(), in); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// next returns the session's next event, or false when Events is closed.
func next(t testing.TB, s *Session) (engine.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		return ev, ok
	case <-time.After(patience):
		t.Fatalf("no event after %v", patience)
		return engine.Event{}, false
	}
}

// collect reads the events of turn up to its end: the outputs and the end
// (the other kinds it skips, after checking their turn).
func collect(t testing.TB, s *Session, turn troupe.TurnID) ([]string, engine.Event) {
	t.Helper()
	var outputs []string
	evs := collectAll(t, s, turn)
	for _, ev := range evs {
		if ev.Kind == engine.EventOutput {
			outputs = append(outputs, ev.Text)
		}
	}
	return outputs, evs[len(evs)-1]
}

// collectAll reads every event of turn up to its end, the end included.
func collectAll(t testing.TB, s *Session, turn troupe.TurnID) []engine.Event {
	t.Helper()
	var evs []engine.Event
	for {
		ev, ok := next(t, s)
		if !ok {
			t.Fatalf("events closed before turn %s ended: %v", turn, s.Err())
		}
		if ev.Turn != turn {
			t.Fatalf("event %+v for turn %q, want turn %q", ev, ev.Turn, turn)
		}
		switch ev.Kind {
		case engine.EventOutput, engine.EventThinking, engine.EventToolCall, engine.EventToolResult, engine.EventUsage, engine.EventPermission:
			evs = append(evs, ev)
		case engine.EventTurnEnd:
			return append(evs, ev)
		default:
			t.Fatalf("event of unknown kind %+v", ev)
		}
	}
}

// turn sends texts as one turn and returns its outputs and end.
func turn(t testing.TB, s *Session, id troupe.TurnID, texts ...string) ([]string, engine.Event) {
	t.Helper()
	send(t, s, id, texts...)
	return collect(t, s, id)
}

// waitClosed reads Events until it is closed, failing on a turn end.
func waitClosed(t testing.TB, s *Session) []engine.Event {
	t.Helper()
	var evs []engine.Event
	for {
		ev, ok := next(t, s)
		if !ok {
			return evs
		}
		if ev.Kind == engine.EventTurnEnd {
			t.Fatalf("unexpected turn end %+v", ev)
		}
		evs = append(evs, ev)
	}
}

// call is one tool call a fakeTools saw.
type call struct {
	Tool string
	Args map[string]any
}

// fakeTools records calls and answers with fn, or "result of <tool>".
type fakeTools struct {
	fn func(ctx context.Context, tool string) (string, error)

	mu    sync.Mutex // guards calls
	calls []call
}

// Specs implements engine.Tools: the fake agent needs no schemas.
func (f *fakeTools) Specs() []tool.Spec { return nil }

func (f *fakeTools) Call(ctx context.Context, tool string, args json.RawMessage) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return "", errors.New("args are not a JSON object")
	}
	f.mu.Lock()
	f.calls = append(f.calls, call{tool, m})
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx, tool)
	}
	return "result of " + tool, nil
}

func (f *fakeTools) take() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// fakeSpec is a StartSpec for agent a with tools and [agent.fake] options.
func fakeSpec(tools engine.Tools, opts map[string]any) engine.StartSpec {
	return engine.StartSpec{
		Key:   troupe.RuntimeKey{Project: "p1", Agent: "a"},
		Agent: troupe.AgentSpec{Name: "a", Engine: troupe.EngineFake, Options: opts},
		Tools: tools,
	}
}
