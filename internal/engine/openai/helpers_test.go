package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// patience bounds every wait of these tests (a hang, never a pace).
const patience = 30 * time.Second

// testKey is the key the tests' agents send.
const testKey = "sk-test-0123456789abcdef"

// rig is a fake model and an engine talking to it.
type rig struct {
	t     *testing.T
	model *fakemodel.Server
	eng   *Engine
	store Store
	dir   string
}

func newRig(t *testing.T, store Store) *rig {
	t.Helper()
	m := fakemodel.New(fakemodel.Options{})
	if err := m.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if store == nil {
		store = NewMemStore()
	}
	eng := New(Options{Store: store, RetryBase: time.Millisecond, Retries: 3,
		Environ: func() []string { return []string{"PATH=/usr/bin:/bin", "TEST_OPENAI_KEY=" + testKey} }})
	return &rig{t: t, model: m, eng: eng, store: store, dir: t.TempDir()}
}

// agent is an openai agent of the rig's model with opts added to its
// [agent.openai] table.
func (r *rig) agent(opts map[string]any) troupe.AgentSpec {
	o := map[string]any{optBaseURL: r.model.URL() + "/v1", optAPIKeyEnv: "TEST_OPENAI_KEY"}
	for k, v := range opts {
		o[k] = v
	}
	return troupe.AgentSpec{Name: "x", Engine: troupe.EngineOpenAI, Model: "test-model", Mode: troupe.ModeStructured, Options: o}
}

var testKeyOf = troupe.RuntimeKey{Project: "p1", Agent: "x"}

// start starts a session and closes it at the end of the test.
func (r *rig) start(spec engine.StartSpec) *Session {
	r.t.Helper()
	if spec.Key == (troupe.RuntimeKey{}) {
		spec.Key = testKeyOf
	}
	if spec.Agent.Name == "" {
		spec.Agent = r.agent(nil)
	}
	if spec.Dir == "" {
		spec.Dir = r.dir
	}
	if spec.Approver == nil && spec.Agent.PermissionMode != "" {
		spec.Approver = &approver{mode: spec.Agent.PermissionMode} // the runtime's decision
	}
	s, err := r.eng.Start(context.Background(), spec)
	if err != nil {
		r.t.Fatalf("start: %v", err)
	}
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		s.Close(ctx)
	})
	return s.(*Session)
}

// send sends a message from the person as turn id.
func send(t *testing.T, s engine.Session, id troupe.TurnID, text string) {
	t.Helper()
	in := engine.Input{Turn: id, Messages: []troupe.Message{{Project: "p1", To: "x", From: troupe.Person, Kind: troupe.KindMessage, Text: text}}}
	if err := s.Send(context.Background(), in); err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
}

// untilEnd collects the events of turn id up to its end.
func untilEnd(t *testing.T, s engine.Session, id troupe.TurnID) ([]engine.Event, engine.Event) {
	t.Helper()
	var evs []engine.Event
	timer := time.NewTimer(patience)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed before turn %s ended: %v", id, s.Err())
			}
			if ev.Kind == engine.EventSession {
				continue
			}
			if ev.Turn != id {
				t.Fatalf("event %+v of turn %q during turn %s", ev, ev.Turn, id)
			}
			if ev.Kind == engine.EventTurnEnd {
				return evs, ev
			}
			evs = append(evs, ev)
		case <-timer.C:
			t.Fatalf("turn %s did not end within %v", id, patience)
		}
	}
}

// turn sends text and waits for the turn's end.
func turn(t *testing.T, s engine.Session, id troupe.TurnID, text string) ([]engine.Event, engine.Event) {
	t.Helper()
	send(t, s, id, text)
	return untilEnd(t, s, id)
}

// results are the tool results of evs, by tool name.
func results(evs []engine.Event) []engine.ToolUse {
	names := map[string]string{}
	var out []engine.ToolUse
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EventToolCall:
			names[ev.Tool.ID] = ev.Tool.Name
		case engine.EventToolResult:
			u := *ev.Tool
			if u.Name == "" {
				u.Name = names[u.ID]
			}
			out = append(out, u)
		}
	}
	return out
}

// call is a scripted tool call.
func call(name, args string) fakemodel.ToolCall {
	return fakemodel.ToolCall{Name: name, Args: json.RawMessage(args)}
}

// testTools are troupe tools standing in for the runtime's.
type testTools struct {
	mu    sync.Mutex
	calls []string
}

func (tt *testTools) Specs() []tool.Spec {
	return []tool.Spec{
		{Name: "list_agents", Description: "List the agents of your team.", Schema: json.RawMessage(`{"type":"object"}`)},
		{Name: "ask_agent", Description: "Ask a teammate.", Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"question":{"type":"string"}},"required":["to","question"]}`)},
	}
}

func (tt *testTools) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	tt.mu.Lock()
	tt.calls = append(tt.calls, name+" "+string(args))
	tt.mu.Unlock()
	switch name {
	case "list_agents":
		return "agents: alice, bob", nil
	case "ask_agent":
		var a struct{ To, Question string }
		json.Unmarshal(args, &a)
		if a.To == "nobody" {
			return "", errors.New(`no agent "nobody" in your project`)
		}
		return fmt.Sprintf("%s says: yes to %q", a.To, a.Question), nil
	}
	return "", fmt.Errorf("no tool %s", name)
}

// approver records permission requests and answers from a table.
// approver stands for the runtime's: it settles what the agent's mode
// settles (permission.Decide), then answers as the person would (allow).
type approver struct {
	mu    sync.Mutex
	mode  string
	asked []string
	allow map[string]bool
}

func (a *approver) Approve(_ context.Context, p engine.Permission) (engine.Decision, error) {
	switch v, why := permission.Decide(a.mode, nil, p.Tool, p.Class); v {
	case permission.Allow:
		return engine.Decision{Allow: true}, nil
	case permission.Deny:
		return engine.Decision{Reason: why}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, p.Tool)
	if a.allow[p.Tool] {
		return engine.Decision{Allow: true}, nil
	}
	return engine.Decision{Reason: "the person said no"}, nil
}

func (a *approver) tools() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// bodyOf is the JSON of a recorded request's messages.
func bodyOf(q fakemodel.Request) string {
	b, _ := json.Marshal(q.Body["messages"])
	return string(b)
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }
