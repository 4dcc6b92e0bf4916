package codex

// Tests with the real, pinned Codex CLI against the fake model on
// 127.0.0.1, in an isolated CODEX_HOME with the offline config
// (codextest). They skip without $TROUPE_CODEX_BIN (fail under CI=true).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/codex/codextest"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// patience bounds every wait on the real CLI (well under 1 s a turn).
const patience = 60 * time.Second

// drive takes a session's steps in the tests, each wait bounded by patience.
var drive = enginetest.Drive{Patience: patience}

// rig is one test's fake model, project folder, CODEX_HOME and engine.
type rig struct {
	bin   string
	model *fakemodel.Server
	dir   string
	env   []string
	eng   *Engine
}

func newRig(t *testing.T) *rig {
	t.Helper()
	bin := codextest.Bin(t)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	home, codexHome := codextest.Home(t, model.URL())
	env := codextest.Env(t, home, codexHome)
	return &rig{bin: bin, model: model, dir: dir, env: env,
		eng: New(Options{Environ: func() []string { return env }, StopTimeout: 3 * time.Second})}
}

// start starts a session of agent a (its command set to the pinned CLI)
// and closes it at the end of the test.
func (r *rig) start(t *testing.T, a troupe.AgentSpec, spec engine.StartSpec) *Session {
	t.Helper()
	if a.Name == "" {
		a.Name = "agent"
	}
	a.Engine, a.Command = troupe.EngineCodex, r.bin
	spec.Agent, spec.Dir = a, r.dir
	spec.Key = troupe.RuntimeKey{Project: "p1", Agent: a.Name}
	s, err := r.eng.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { drive.Close(t, s) })
	return s.(*Session)
}

func TestOneTurn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Instructions: "You are agent A of troupe."})
	id := drive.SessionID(t, s)
	if id != s.ID() {
		t.Fatalf("session event %q, ID %q", id, s.ID())
	}
	a0 := s.Activity()
	evs, end := drive.RunTurn(t, s, "t1", "[[text:hello from codex]]")
	if end.Error != "" || end.Text != "hello from codex" {
		t.Fatalf("turn end %+v", end)
	}
	if got := enginetest.Outputs(evs); got != "hello from codex" {
		t.Fatalf("outputs %q", got)
	}
	var usage *engine.Usage
	for _, ev := range evs {
		if ev.Kind == engine.EventUsage {
			usage = ev.Usage
		}
	}
	if usage == nil || usage.InputTokens == 0 || usage.OutputTokens == 0 {
		t.Fatalf("usage %+v", usage)
	}
	if a := s.Activity(); a.Count <= a0.Count {
		t.Fatalf("activity %+v did not advance from %+v", a, a0)
	}
	reqs := r.model.Requests()
	if len(reqs) == 0 || !strings.Contains(mustJSON(t, reqs[len(reqs)-1].Body), "You are agent A of troupe.") {
		t.Fatalf("the instructions did not reach the model")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSeveralTurnsOneProcess(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	id := drive.SessionID(t, s)
	pid := s.PID()
	for i, word := range []string{"alpha", "beta", "gamma"} {
		_, end := drive.RunTurn(t, s, troupe.TurnID("t"+word), "say [[text:"+word+"]]")
		if end.Error != "" || end.Text != word {
			t.Fatalf("turn %d end %+v", i, end)
		}
	}
	if s.PID() != pid || s.ID() != id {
		t.Fatalf("pid %d→%d, thread %s→%s", pid, s.PID(), id, s.ID())
	}
	reqs := r.model.Requests()
	if body := mustJSON(t, reqs[len(reqs)-1].Body); !strings.Contains(body, "alpha") || !strings.Contains(body, "beta") {
		t.Fatalf("the last request does not carry the earlier turns: %.500s", body)
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	if err := s.Send(context.Background(), enginetest.Input("t1", "[[text:first.second]] [[slow:1h every 1h]]")); err != nil {
		t.Fatal(err)
	}
	for {
		ev, ok := drive.Next(t, s)
		if !ok {
			t.Fatalf("events closed: %v", s.Err())
		}
		if ev.Kind == engine.EventOutput {
			break
		}
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, end := drive.UntilEnd(t, s, "t1")
	if end.Error != "interrupted" {
		t.Fatalf("turn end %+v, want interrupted", end)
	}
	_, end = drive.RunTurn(t, s, "t2", "[[text:after]]")
	if end.Error != "" || end.Text != "after" {
		t.Fatalf("turn after the interrupt %+v", end)
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	id := drive.SessionID(t, s)
	_, end := drive.RunTurn(t, s, "t1", "the word is XYZZY [[text:noted]]")
	if end.Error != "" {
		t.Fatal(end.Error)
	}
	drive.Close(t, s)

	s2 := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Resume: id})
	if got := drive.SessionID(t, s2); got != id {
		t.Fatalf("resumed thread %q, want %q", got, id)
	}
	_, end = drive.RunTurn(t, s2, "t2", "[[text:again]]")
	if end.Error != "" || end.Text != "again" {
		t.Fatalf("turn end %+v", end)
	}
	reqs := r.model.Requests()
	if body := mustJSON(t, reqs[len(reqs)-1].Body); !strings.Contains(body, "XYZZY") || !strings.Contains(body, "noted") {
		t.Fatalf("the resumed thread's request lacks the earlier exchange: %.500s", body)
	}
}

func TestResumeUnknownStartsNewThread(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const lost = "01a22887-72e5-70c0-86bf-17203134efaa"
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Resume: lost})
	if id := drive.SessionID(t, s); id == lost || id == "" {
		t.Fatalf("thread %q after a refused resume", id)
	}
	if _, end := drive.RunTurn(t, s, "t1", "[[text:fresh]]"); end.Error != "" || end.Text != "fresh" {
		t.Fatalf("turn end %+v", end)
	}
}

func TestModelErrorFailsTurn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	t0 := time.Now()
	_, end := drive.RunTurn(t, s, "t1", "[[error:500]]")
	if end.Error == "" || end.Error == "interrupted" {
		t.Fatalf("turn end %+v, want Codex's error", end)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Fatalf("the failed turn took %v", d)
	}
	t.Logf("error after %v: %s", time.Since(t0), end.Error)
	if _, end := drive.RunTurn(t, s, "t2", "[[text:ok]]"); end.Error != "" {
		t.Fatalf("turn after the failure %+v", end)
	}
}

// approver decides every request as allow says and records them.
type approver struct {
	allow bool
	mu    sync.Mutex
	got   []engine.Permission
}

func (a *approver) Approve(_ context.Context, p engine.Permission) (engine.Decision, error) {
	a.mu.Lock()
	a.got = append(a.got, p)
	a.mu.Unlock()
	if a.allow {
		return engine.Decision{Allow: true}, nil
	}
	return engine.Decision{Reason: "no"}, nil
}

func TestApproval(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "Allowed", false: "Denied"}[allow], func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			ap := &approver{allow: allow}
			agent := troupe.AgentSpec{Options: map[string]any{"config": map[string]any{
				"approval_policy": "on-request", "sandbox_mode": "read-only"}}}
			s := r.start(t, agent, engine.StartSpec{Approver: ap})
			drive.SessionID(t, s)
			evs, end := drive.RunTurn(t, s, "t1", `[[tool:exec_command {"cmd":"touch made","sandbox_permissions":"require_escalated","justification":"a test"}]]`)
			if end.Error != "" {
				t.Fatalf("turn end %+v", end)
			}
			var perm *engine.Event
			for i, ev := range evs {
				if ev.Kind == engine.EventPermission {
					perm = &evs[i]
				}
			}
			if perm == nil || perm.Permission.Tool != toolShell || perm.Decision.Allow != allow || !strings.Contains(perm.Permission.Title, "touch made") {
				t.Fatalf("permission event %+v in %+v", perm, evs)
			}
			_, err := os.Stat(filepath.Join(r.dir, "made"))
			if allow != (err == nil) {
				t.Fatalf("allow %v: the file: %v", allow, err)
			}
		})
	}
}

// TestMCP: troupe's MCP server is reached with the session's token, which
// travels in the child's environment, never on its command line (C2); its
// tools are mcp__troupe__<tool>.
func TestMCP(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	mcp := enginetest.NewFakeMCP(t)
	const tok = "tok-4c1d9e"
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{MCP: engine.MCPAccess{URL: mcp.URL, Token: tok}})
	drive.SessionID(t, s)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), tok) {
		t.Fatalf("the token is on the command line: %q", cmdline)
	}
	evs, end := drive.RunTurn(t, s, "t1", `[[tool:mcp__troupe__list_agents {}]]`)
	if end.Error != "" {
		t.Fatalf("turn end %+v", end)
	}
	var call, result *engine.ToolUse
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EventToolCall:
			call = ev.Tool
		case engine.EventToolResult:
			result = ev.Tool
		}
	}
	if call == nil || call.Name != "mcp__troupe__list_agents" || result == nil || result.Output != "agents: alice, bob" || result.IsError {
		t.Fatalf("call %+v, result %+v", call, result)
	}
	if got := mcp.Auth(); got != "Bearer "+tok {
		t.Fatalf("Authorization %q", got)
	}
}
