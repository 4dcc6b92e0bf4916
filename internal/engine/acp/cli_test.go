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
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// patience bounds every wait on the real CLI.
const patience = 90 * time.Second

// drive takes a session's steps in the tests, each wait bounded by patience.
var drive = enginetest.Drive{Patience: patience}

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
	t.Cleanup(func() { drive.Close(t, s) })
	return s.(*Session)
}

// TestCLITurnsOneProcessAndResume: one OpenCode process, three turns in
// one session (text; the model calls bash, allowed by default; text again),
// then a second process loads the session by its id and the model sees the
// earlier exchange.
func TestCLITurnsOneProcessAndResume(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	s := r.start(t, engine.StartSpec{Instructions: "You are agent one."})
	id := drive.SessionID(t, s)
	if !strings.HasPrefix(id, "ses_") {
		t.Errorf("session id %q", id)
	}
	pid := s.PID()

	evs, end := drive.RunTurn(t, s, "t1", "[[text:hello from the fake]]")
	if end.Error != "" || end.Text != "hello from the fake" {
		t.Fatalf("turn 1 end %+v", end)
	}
	if len(enginetest.Kinds(evs, engine.EventOutput)) == 0 || len(enginetest.Kinds(evs, engine.EventUsage)) != 1 {
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

	evs, end = drive.RunTurn(t, s, "t2", `[[tool:bash {"command":"echo hi-from-shell","description":"say hi"}]]`)
	calls, results := enginetest.Kinds(evs, engine.EventToolCall), enginetest.Kinds(evs, engine.EventToolResult)
	if end.Error != "" || len(calls) != 1 || len(results) != 1 || calls[0].Tool.Name != "bash" ||
		!strings.Contains(results[0].Tool.Output, "hi-from-shell") || results[0].Tool.IsError {
		t.Fatalf("turn 2: end %+v calls %+v results %+v", end, calls, results)
	}
	if !strings.Contains(end.Text, "TOOL_RESULT_SEEN") {
		t.Errorf("turn 2 text %q", end.Text)
	}

	_, end = drive.RunTurn(t, s, "t3", "[[text:third]]")
	if end.Error != "" || end.Text != "third" || s.PID() != pid || s.ID() != id {
		t.Fatalf("turn 3 end %+v, pid %d→%d", end, pid, s.PID())
	}
	drive.Close(t, s)
	if err := s.Err(); err != nil {
		t.Errorf("err after close: %v", err)
	}

	s2 := r.start(t, engine.StartSpec{Resume: id})
	if got := drive.SessionID(t, s2); got != id {
		t.Fatalf("loaded session %q, want %q", got, id)
	}
	n := len(r.model.Requests())
	_, end = drive.RunTurn(t, s2, "t4", "[[text:again]]")
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
	drive.SessionID(t, s)

	if err := s.Send(context.Background(), enginetest.Input("t1", "[[text:first words and then a lot more]] [[slow:1h every 1h]]")); err != nil {
		t.Fatal(err)
	}
	ev, _ := drive.Next(t, s)
	if ev.Kind != engine.EventOutput {
		t.Fatalf("first event %+v, want output", ev)
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, end := drive.UntilEnd(t, s, "t1")
	if end.Error != "interrupted" {
		t.Fatalf("interrupted turn end %+v", end)
	}

	if err := s.Send(context.Background(), enginetest.Input("t2", "[[error:500]]")); err != nil {
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
	_, end = drive.UntilEnd(t, s, "t2")
	if end.Error != "interrupted" {
		t.Fatalf("turn end after 500 %+v", end)
	}
	_, end = drive.RunTurn(t, s, "t3", "[[text:still here]]")
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
	drive.SessionID(t, s)

	evs, end := drive.RunTurn(t, s, "t1", `[[tool:bash {"command":"echo allowed-run","description":"allowed"}]]`)
	perms, results := enginetest.Kinds(evs, engine.EventPermission), enginetest.Kinds(evs, engine.EventToolResult)
	if end.Error != "" || len(perms) != 1 || !perms[0].Decision.Allow || perms[0].Permission.Tool != "bash" || perms[0].Permission.Turn != "t1" {
		t.Fatalf("allowed: end %+v perms %+v", end, perms)
	}
	if len(results) != 1 || results[0].Tool.IsError || !strings.Contains(results[0].Tool.Output, "allowed-run") {
		t.Fatalf("allowed: results %+v", results)
	}

	evs, end = drive.RunTurn(t, s, "t2", `[[tool:bash {"command":"echo forbidden-run","description":"forbidden"}]]`)
	perms, results = enginetest.Kinds(evs, engine.EventPermission), enginetest.Kinds(evs, engine.EventToolResult)
	if end.Error != "" || len(perms) != 1 || perms[0].Decision.Allow {
		t.Fatalf("denied: end %+v perms %+v", end, perms)
	}
	if len(results) != 1 || !results[0].Tool.IsError || strings.Contains(results[0].Tool.Output, "forbidden-run\n") {
		t.Fatalf("denied: results %+v", results)
	}
	t.Logf("denied result: %q; permission %+v", results[0].Tool.Output, perms[0].Permission)
}
