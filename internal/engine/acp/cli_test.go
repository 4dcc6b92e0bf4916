package acp

// Tests with the real, pinned OpenCode CLI (`opencode acp`) against the
// fake model on 127.0.0.1, in an isolated HOME with the offline
// environment (opencodetest). They skip without $TROUPE_OPENCODE_BIN (fail
// under CI=true). OpenCode costs about 5 s a start on 2 cores: each test
// reuses its session for several checks.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/acp/opencodetest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// patience bounds every wait on the real CLI.
const patience = 90 * time.Second

type rig struct {
	bin   string
	model *fakemodel.Server
	dir   string
	env   []string
	eng   *Engine
}

func newRig(t *testing.T, permission map[string]any) *rig {
	t.Helper()
	bin := opencodetest.Bin(t)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := opencodetest.Env(t, model.URL(), permission)
	return &rig{bin: bin, model: model, dir: dir, env: env,
		eng: NewOpenCode(Options{Environ: func() []string { return env }, StopTimeout: 3 * time.Second})}
}

func (r *rig) start(t *testing.T, spec engine.StartSpec) *Session {
	t.Helper()
	a := spec.Agent
	if a.Name == "" {
		a.Name = "agent"
	}
	a.Engine, a.Command = troupe.EngineOpenCode, r.bin
	spec.Agent, spec.Dir = a, r.dir
	spec.Key = troupe.RuntimeKey{Project: "p1", Agent: a.Name}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s, err := r.eng.Start(ctx, spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { closeSession(t, s) })
	return s.(*Session)
}

func closeSession(t *testing.T, s engine.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

func input(id troupe.TurnID, text string) engine.Input {
	return engine.Input{Turn: id, Messages: []troupe.Message{{Project: "p1", To: "agent", From: troupe.Person, Kind: troupe.KindMessage, Text: text}}}
}

func next(t *testing.T, s engine.Session) (engine.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		return ev, ok
	case <-time.After(patience):
		t.Fatalf("no event after %v", patience)
		return engine.Event{}, false
	}
}

func sessionEvent(t *testing.T, s engine.Session) string {
	t.Helper()
	ev, ok := next(t, s)
	if !ok || ev.Kind != engine.EventSession || ev.SessionID == "" {
		t.Fatalf("first event %+v (open %v), want the session id", ev, ok)
	}
	return ev.SessionID
}

func runTurn(t *testing.T, s engine.Session, id troupe.TurnID, text string) ([]engine.Event, engine.Event) {
	t.Helper()
	if err := s.Send(context.Background(), input(id, text)); err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
	return untilEnd(t, s, id)
}

func untilEnd(t *testing.T, s engine.Session, id troupe.TurnID) ([]engine.Event, engine.Event) {
	t.Helper()
	var evs []engine.Event
	for {
		ev, ok := next(t, s)
		if !ok {
			t.Fatalf("events closed before turn %s ended: %v", id, s.Err())
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

func kinds(evs []engine.Event, k engine.EventKind) []engine.Event {
	var out []engine.Event
	for _, ev := range evs {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// TestCLITurnsOneProcessAndResume: one OpenCode process, three turns in
// one session (text; the model calls bash, allowed by default; text again),
// then a second process loads the session by its id and the model sees the
// earlier exchange.
func TestCLITurnsOneProcessAndResume(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	s := r.start(t, engine.StartSpec{Instructions: "You are agent one."})
	id := sessionEvent(t, s)
	if !strings.HasPrefix(id, "ses_") {
		t.Errorf("session id %q", id)
	}
	pid := s.PID()

	evs, end := runTurn(t, s, "t1", "[[text:hello from the fake]]")
	if end.Error != "" || end.Text != "hello from the fake" {
		t.Fatalf("turn 1 end %+v", end)
	}
	if len(kinds(evs, engine.EventOutput)) == 0 || len(kinds(evs, engine.EventUsage)) != 1 {
		t.Errorf("turn 1 events %+v", evs)
	}
	reqs := r.model.Requests()
	found := false
	for _, q := range reqs {
		if strings.Contains(body(q), "You are agent one.") {
			found = true
		}
	}
	if !found {
		t.Errorf("the instructions never reached the model")
	}

	evs, end = runTurn(t, s, "t2", `[[tool:bash {"command":"echo hi-from-shell","description":"say hi"}]]`)
	calls, results := kinds(evs, engine.EventToolCall), kinds(evs, engine.EventToolResult)
	if end.Error != "" || len(calls) != 1 || len(results) != 1 || calls[0].Tool.Name != "bash" ||
		!strings.Contains(results[0].Tool.Output, "hi-from-shell") || results[0].Tool.IsError {
		t.Fatalf("turn 2: end %+v calls %+v results %+v", end, calls, results)
	}
	if !strings.Contains(end.Text, "TOOL_RESULT_SEEN") {
		t.Errorf("turn 2 text %q", end.Text)
	}

	_, end = runTurn(t, s, "t3", "[[text:third]]")
	if end.Error != "" || end.Text != "third" || s.PID() != pid || s.ID() != id {
		t.Fatalf("turn 3 end %+v, pid %d→%d", end, pid, s.PID())
	}
	closeSession(t, s)
	if err := s.Err(); err != nil {
		t.Errorf("err after close: %v", err)
	}

	s2 := r.start(t, engine.StartSpec{Resume: id})
	if got := sessionEvent(t, s2); got != id {
		t.Fatalf("loaded session %q, want %q", got, id)
	}
	n := len(r.model.Requests())
	_, end = runTurn(t, s2, "t4", "[[text:again]]")
	if end.Error != "" || end.Text != "again" {
		t.Fatalf("turn 4 end %+v", end)
	}
	var last fakemodel.Request
	for _, q := range r.model.Requests()[n:] {
		if strings.Contains(q.Prompt, "again") {
			last = q
		}
	}
	if !strings.Contains(body(last), "hello from the fake") {
		t.Errorf("the loaded session's request does not carry the earlier exchange")
	}
}

// body is a request's JSON body as text.
func body(q fakemodel.Request) string {
	b, _ := json.Marshal(q.Body)
	return string(b)
}

// TestCLIInterruptAndModelError: in one session, a slow answer is
// interrupted (session/cancel → "interrupted"); then a model that fails
// with HTTP 500: OpenCode retries silently for ever, so no turn end comes
// (the runtime's inactivity limit cuts such a turn) until the interrupt;
// the session then still answers.
func TestCLIInterruptAndModelError(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	s := r.start(t, engine.StartSpec{})
	sessionEvent(t, s)

	if err := s.Send(context.Background(), input("t1", "[[text:first words and then a lot more]] [[slow:1h every 1h]]")); err != nil {
		t.Fatal(err)
	}
	ev, _ := next(t, s)
	if ev.Kind != engine.EventOutput {
		t.Fatalf("first event %+v, want output", ev)
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, end := untilEnd(t, s, "t1")
	if end.Error != "interrupted" {
		t.Fatalf("interrupted turn end %+v", end)
	}

	if err := s.Send(context.Background(), input("t2", "[[error:500]]")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-s.Events():
		if ev.Kind == engine.EventTurnEnd {
			t.Fatalf("a turn end %+v for a model that answers 500: OpenCode was expected to retry", ev)
		}
	case <-time.After(4 * time.Second):
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, end = untilEnd(t, s, "t2")
	if end.Error != "interrupted" {
		t.Fatalf("turn end after 500 %+v", end)
	}
	_, end = runTurn(t, s, "t3", "[[text:still here]]")
	if end.Error != "" || end.Text != "still here" {
		t.Fatalf("turn 3 end %+v", end)
	}
}

// approver allows commands that contain "allowed" and denies the others.
type approver struct {
	mu   sync.Mutex
	seen []engine.Permission
}

func (a *approver) Approve(ctx context.Context, p engine.Permission) (engine.Decision, error) {
	a.mu.Lock()
	a.seen = append(a.seen, p)
	a.mu.Unlock()
	if strings.Contains(string(p.Input), "allowed") {
		return engine.Decision{Allow: true}, nil
	}
	return engine.Decision{Reason: "no"}, nil
}

// TestCLIPermission: with OpenCode's permission {"bash":"ask"}, a bash
// call asks (session/request_permission); the Approver allows one command
// and denies another, and each answer reaches OpenCode.
func TestCLIPermission(t *testing.T) {
	t.Parallel()
	r := newRig(t, map[string]any{"bash": "ask"})
	a := &approver{}
	s := r.start(t, engine.StartSpec{Approver: a})
	sessionEvent(t, s)

	evs, end := runTurn(t, s, "t1", `[[tool:bash {"command":"echo allowed-run","description":"allowed"}]]`)
	perms, results := kinds(evs, engine.EventPermission), kinds(evs, engine.EventToolResult)
	if end.Error != "" || len(perms) != 1 || !perms[0].Decision.Allow || perms[0].Permission.Tool != "bash" || perms[0].Permission.Turn != "t1" {
		t.Fatalf("allowed: end %+v perms %+v", end, perms)
	}
	if len(results) != 1 || results[0].Tool.IsError || !strings.Contains(results[0].Tool.Output, "allowed-run") {
		t.Fatalf("allowed: results %+v", results)
	}

	evs, end = runTurn(t, s, "t2", `[[tool:bash {"command":"echo forbidden-run","description":"forbidden"}]]`)
	perms, results = kinds(evs, engine.EventPermission), kinds(evs, engine.EventToolResult)
	if end.Error != "" || len(perms) != 1 || perms[0].Decision.Allow {
		t.Fatalf("denied: end %+v perms %+v", end, perms)
	}
	if len(results) != 1 || !results[0].Tool.IsError || strings.Contains(results[0].Tool.Output, "forbidden-run\n") {
		t.Fatalf("denied: results %+v", results)
	}
	t.Logf("denied result: %q; permission %+v", results[0].Tool.Output, perms[0].Permission)
}
