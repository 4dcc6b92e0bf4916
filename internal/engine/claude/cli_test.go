package claude

// Tests with the real, pinned Claude Code CLI against the fake model on
// 127.0.0.1, in an isolated HOME with the offline environment
// (claudetest). They skip without $TROUPE_CLAUDE_BIN (fail under CI=true).

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
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// patience bounds every wait on the real CLI (about 1 s a turn).
const patience = 60 * time.Second

// drive takes a session's steps in the tests, each wait bounded by patience.
var drive = enginetest.Drive{Patience: patience}

// rig is one test's fake model, project folder, HOME and engine.
type rig struct {
	bin   string
	model *fakemodel.Server
	dir   string
	env   []string
	eng   *Engine
	sb    sandbox.Policy // the TUI's (startTUI)
	// unsandboxed starts the TUI outside troupe's sandbox (startTUI).
	unsandboxed bool
}

func newRig(t *testing.T) *rig {
	t.Helper()
	bin := claudetest.Bin(t)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	return newRigAt(t, bin, model, model.URL())
}

func newRigAt(t *testing.T, bin string, model *fakemodel.Server, url string) *rig {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := claudetest.Env(t, claudetest.Home(t, dir), url)
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
	a.Engine, a.Command = troupe.EngineClaude, r.bin
	spec.Agent, spec.Dir = a, r.dir
	spec.Key = troupe.RuntimeKey{Project: "p1", Agent: a.Name}
	s, err := r.eng.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { drive.Close(t, s) })
	return s.(*Session)
}

func TestCLIOneTurn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Instructions: "You are agent INSTR-MARK-7."})
	id := drive.SessionID(t, s)
	evs, end := drive.RunTurn(t, s, "t1", "hello [[text:HELLO THERE]]")
	if end.Error != "" || end.Text != "HELLO THERE" {
		t.Fatalf("turn end %+v, want text HELLO THERE", end)
	}
	if got := enginetest.Outputs(evs); got != "HELLO THERE" {
		t.Errorf("outputs %q, want HELLO THERE (once)", got)
	}
	if u := enginetest.Kinds(evs, engine.EventUsage); len(u) != 1 || u[0].Usage.InputTokens == 0 {
		t.Errorf("usage events %+v, want one with tokens", u)
	}
	reqs := modelRequests(t, r.model)
	last := reqs[len(reqs)-1]
	if last.SessionID != id {
		t.Errorf("model request of session %q, want %q", last.SessionID, id)
	}
	if sys, _ := json.Marshal(last.Body["system"]); !strings.Contains(string(sys), "INSTR-MARK-7") {
		t.Errorf("the instructions are not in the system prompt")
	}
	if !strings.Contains(last.Prompt, ": message from the person you work for]") {
		t.Errorf("prompt %q is not engine.Render's", last.Prompt)
	}
}

// modelRequests returns the ordinary model requests (no side queries).
func modelRequests(t *testing.T, m *fakemodel.Server) []fakemodel.Request {
	t.Helper()
	var out []fakemodel.Request
	for _, r := range m.Requests() {
		if r.Side == "" && r.Body != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatal("no model request recorded")
	}
	return out
}

func TestCLIFiveTurnsOneProcess(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	id := drive.SessionID(t, s)
	pid := s.PID()
	for i := range 5 {
		turn := troupe.TurnID(fmt.Sprintf("t%d", i+1))
		want := fmt.Sprintf("answer %d", i+1)
		_, end := drive.RunTurn(t, s, turn, "[[text:"+want+"]]")
		if end.Error != "" || end.Text != want {
			t.Fatalf("turn %s ended %+v, want %q", turn, end, want)
		}
	}
	if s.PID() != pid || s.ID() != id {
		t.Errorf("pid %d session %s after five turns, want %d %s", s.PID(), s.ID(), pid, id)
	}
	for _, req := range modelRequests(t, r.model) {
		if req.SessionID != id {
			t.Errorf("model request of session %q, want %q", req.SessionID, id)
		}
	}
}

func TestCLIInterruptMidStream(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	if err := s.Send(context.Background(), enginetest.Input("t1", "[[text:streaming slowly, word by word]] [[slow:30s every 1s]]")); err != nil {
		t.Fatal(err)
	}
	for {
		ev, ok := drive.Next(t, s)
		if !ok {
			t.Fatalf("events closed: %v", s.Err())
		}
		if ev.Kind == engine.EventTurnEnd {
			t.Fatalf("turn ended before the interrupt: %+v", ev)
		}
		if ev.Kind == engine.EventOutput {
			break
		}
	}
	if err := s.Send(context.Background(), enginetest.Input("t2", "too soon")); err == nil {
		t.Error("send during a turn: no error")
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, end := drive.UntilEnd(t, s, "t1"); end.Error != "interrupted" {
		t.Fatalf("interrupted turn ended %+v, want error interrupted", end)
	}
	if _, end := drive.RunTurn(t, s, "t2", "[[text:AFTER]]"); end.Error != "" || end.Text != "AFTER" {
		t.Fatalf("turn after the interrupt ended %+v", end)
	}
}

// approver records the requests and answers with its decision.
type approver struct {
	mu   sync.Mutex
	asks []engine.Permission
	d    engine.Decision
}

func (a *approver) Approve(_ context.Context, p engine.Permission) (engine.Decision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asks = append(a.asks, p)
	return a.d, nil
}

func (a *approver) asked() []engine.Permission {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]engine.Permission(nil), a.asks...)
}

func TestCLIPermission(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			ap := &approver{d: engine.Decision{Allow: allow, Reason: "the person said no"}}
			s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Approver: ap})
			drive.SessionID(t, s)
			evs, end := drive.RunTurn(t, s, "t1", `[[tool:Bash {"command":"echo hi-from-bash > out.txt && cat out.txt"}]]`)
			asks := ap.asked()
			if len(asks) != 1 || asks[0].Tool != "Bash" || !strings.Contains(string(asks[0].Input), "echo hi-from-bash") || asks[0].Turn != "t1" {
				t.Fatalf("approver asked %+v, want one Bash request of turn t1", asks)
			}
			perms := enginetest.Kinds(evs, engine.EventPermission)
			if len(perms) != 1 || perms[0].Decision.Allow != allow || perms[0].Permission.Tool != "Bash" {
				t.Errorf("permission events %+v", perms)
			}
			calls, results := enginetest.Kinds(evs, engine.EventToolCall), enginetest.Kinds(evs, engine.EventToolResult)
			if len(calls) != 1 || calls[0].Tool.Name != "Bash" || len(results) != 1 || results[0].Tool.ID != calls[0].Tool.ID {
				t.Fatalf("tool calls %+v results %+v", calls, results)
			}
			res := results[0].Tool
			if allow && (res.IsError || !strings.Contains(res.Output, "hi-from-bash") || !strings.Contains(end.Text, "TOOL_RESULT_SEEN: hi-from-bash")) {
				t.Errorf("allowed: result %+v, turn end %q", res, end.Text)
			}
			if !allow && (!res.IsError || !strings.Contains(end.Text, "the person said no")) {
				t.Errorf("denied: result %+v, turn end %q; want the denial seen by the model", res, end.Text)
			}
		})
	}
}

func TestCLITroupeToolsNeverAsked(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	mcp := newFakeMCP(t)
	ap := &approver{d: engine.Decision{Reason: "must not be asked"}}
	// Claude Code defers MCP tools behind ToolSearch; the fake model can
	// only call tools the request offers.
	a := troupe.AgentSpec{Env: map[string]string{"ENABLE_TOOL_SEARCH": "false"}}
	s := r.start(t, a, engine.StartSpec{Approver: ap, MCP: engine.MCPAccess{URL: mcp.URL, Token: "tok-123"}})
	drive.SessionID(t, s)
	evs, end := drive.RunTurn(t, s, "t1", `[[tool:mcp__troupe__list_agents {}]]`)
	if asks := ap.asked(); len(asks) != 0 {
		t.Errorf("approver asked %+v for a troupe tool", asks)
	}
	if end.Error != "" || !strings.Contains(end.Text, "TOOL_RESULT_SEEN: agents: alice, bob") {
		t.Errorf("turn end %+v, want the tool's result seen by the model", end)
	}
	if calls := enginetest.Kinds(evs, engine.EventToolCall); len(calls) != 1 || calls[0].Tool.Name != "mcp__troupe__list_agents" {
		t.Errorf("tool calls %+v", calls)
	}
	if t.Failed() {
		home := strings.TrimPrefix(r.env[0], "HOME=")
		filepath.WalkDir(filepath.Join(home, ".cache"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				t.Logf("%s:\n%s", p, b)
			}
			return nil
		})
	}
	if got := mcp.Auth(); got != "Bearer tok-123" {
		t.Errorf("MCP Authorization %q, want the session's token", got)
	}
}

func TestCLIResume(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	id := drive.SessionID(t, s)
	drive.RunTurn(t, s, "t1", "remember the word PAPAYA-55 [[text:noted]]")
	drive.Close(t, s)

	s2 := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Resume: id})
	if got := drive.SessionID(t, s2); got != id {
		t.Fatalf("resumed session reports id %s, want %s", got, id)
	}
	_, end := drive.RunTurn(t, s2, "t2", "[[text:back]]")
	if end.Error != "" || end.Text != "back" {
		t.Fatalf("turn after resume ended %+v", end)
	}
	reqs := modelRequests(t, r.model)
	last := reqs[len(reqs)-1]
	if b, _ := json.Marshal(last.Body["messages"]); !strings.Contains(string(b), "PAPAYA-55") || last.SessionID != id {
		t.Errorf("request after resume (session %s) does not hold the earlier conversation", last.SessionID)
	}
	if s2.ID() != id {
		t.Errorf("session id %s after resume, want %s", s2.ID(), id)
	}
}

func TestCLIResumeUnknownStartsFresh(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const lost = "99999999-2222-4333-8444-555555555555"
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{Resume: lost})
	if got := drive.SessionID(t, s); got != lost {
		t.Fatalf("first session event %s, want the id resumed", got)
	}
	evs, end := drive.RunTurn(t, s, "t1", "[[text:fresh start]]")
	if end.Error != "" || end.Text != "fresh start" {
		t.Fatalf("turn ended %+v", end)
	}
	ids := enginetest.Kinds(evs, engine.EventSession)
	if len(ids) != 1 || ids[0].SessionID == lost || ids[0].SessionID != s.ID() {
		t.Fatalf("session events %+v, want one new id (the session's %s)", ids, s.ID())
	}
	// The person is told, in the turn: a notice naming both ids.
	notes := enginetest.Kinds(evs, engine.EventNotice)
	if len(notes) != 1 || notes[0].Turn != "t1" || !strings.Contains(notes[0].Text, lost) || !strings.Contains(notes[0].Text, s.ID()) {
		t.Errorf("notices %+v, want one in turn t1 naming the lost and the new conversation", notes)
	}
	reqs := modelRequests(t, r.model)
	if reqs[len(reqs)-1].SessionID != s.ID() {
		t.Errorf("model request of session %s, want %s", reqs[len(reqs)-1].SessionID, s.ID())
	}
}

func TestCLIModelError(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	_, end := drive.RunTurn(t, s, "t1", "[[error:500]]")
	if !strings.HasPrefix(end.Error, "API Error: 500") {
		t.Fatalf("turn end %+v, want the CLI's API Error: 500", end)
	}
	if _, end := drive.RunTurn(t, s, "t2", "[[text:ok again]]"); end.Error != "" || end.Text != "ok again" {
		t.Fatalf("turn after the error ended %+v", end)
	}
}

func TestCLINothingListening(t *testing.T) {
	t.Parallel()
	bin := claudetest.Bin(t)
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	url := model.URL()
	model.Close() // nothing listens there any more
	r := newRigAt(t, bin, model, url)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	_, end := drive.RunTurn(t, s, "t1", "anyone there?")
	if !strings.Contains(end.Error, "Connection refused") && !strings.Contains(end.Error, "ECONNREFUSED") {
		t.Fatalf("turn end %+v, want the CLI's connection error", end)
	}
}

// C4: the limit troupe reports (ToolCallLimit, here the agent's
// tool_timeout of 2s) is the one Claude Code applies to a troupe tool call:
// its MCP client gives up on a call that takes longer.
func TestCLIToolCallLimit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	mcp := newFakeMCP(t)
	a := troupe.AgentSpec{Env: map[string]string{"ENABLE_TOOL_SEARCH": "false"}, Options: map[string]any{"tool_timeout": "2s"}}
	if got := r.eng.ToolCallLimit(a); got != 2*time.Second {
		t.Fatalf("ToolCallLimit = %v, want 2s", got)
	}
	s := r.start(t, a, engine.StartSpec{MCP: engine.MCPAccess{URL: mcp.URL, Token: "tok"}})
	drive.SessionID(t, s)
	began := time.Now()
	evs, end := drive.RunTurn(t, s, "t1", `[[tool:mcp__troupe__slow_tool {}]]`)
	took := time.Since(began)
	results := enginetest.Kinds(evs, engine.EventToolResult)
	if len(results) != 1 || !results[0].Tool.IsError || took > 15*time.Second {
		t.Fatalf("after %v: results %+v, end %+v; want the call cut after about 2s", took, results, end)
	}
	t.Logf("cut after %v: %q", took, results[0].Tool.Output)
}

// TestCLITakesATurnOfInputBytes: a turn of InputBytes of text (the most
// the runtime gives a Claude agent) goes over the CLI's stdin line and
// reaches the model whole.
func TestCLITakesATurnOfInputBytes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.start(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	text := "[[text:BIG OK]]\n" + strings.Repeat("0123456789abcdef", InputBytes/16)
	in := enginetest.Input("t1", text[:InputBytes-engine.RenderedBaseLen()-200]) // room for the first line and the header
	if n := len(engine.Render(in)); n > InputBytes {
		t.Fatalf("rendered turn of %d bytes, more than InputBytes", n)
	}
	if err := s.Send(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if _, end := drive.UntilEnd(t, s, "t1"); end.Error != "" || end.Text != "BIG OK" {
		t.Fatalf("turn end %+v, want BIG OK", end)
	}
	reqs := modelRequests(t, r.model)
	if p := reqs[len(reqs)-1].Prompt; !strings.Contains(p, in.Messages[0].Text) {
		t.Errorf("the model got a prompt of %d bytes, not the %d-byte message whole", len(p), len(in.Messages[0].Text))
	}
}
