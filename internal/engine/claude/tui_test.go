package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/engine/enginetest"
	"github.com/troupe-dev/troupe/internal/engine/terminal"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/procstat"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// tuiRig starts the pinned TUI in a fresh folder the isolated HOME has
// never trusted (so the trust dialog shows, or troupe saves the trust
// first: TestTUIStartDialogs), against the fake model.
func tuiRig(t *testing.T, seed func(home string)) *rig {
	t.Helper()
	r := newRig(t)
	home, _ := lookup(r.env, "HOME")
	// A HOME that knows the CLI (onboarding done, the key approved) but
	// not the folder.
	claudeJSON := filepath.Join(home, ".claude.json")
	var cfg map[string]any
	b, err := os.ReadFile(claudeJSON)
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("read the seeded %s: %v", claudeJSON, err)
	}
	cfg["projects"] = map[string]any{}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(claudeJSON, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		seed(home)
	}
	return r
}

func (r *rig) startTUI(t *testing.T, a troupe.AgentSpec, spec engine.StartSpec) *terminal.Session {
	t.Helper()
	a.Mode = troupe.ModeTerminal
	if a.PermissionMode == "" {
		a.PermissionMode = "acceptEdits" // not the TUI's auto mode and its classifier (docs/engines/claude-code.md)
	}
	if a.Name == "" {
		a.Name = "agent"
	}
	a.Engine, a.Command = troupe.EngineClaude, r.bin
	spec.Agent, spec.Dir = a, r.dir
	spec.Key = troupe.RuntimeKey{Project: "p1", Agent: a.Name}
	if !spec.Sandbox.On && !r.unsandboxed {
		spec.Sandbox = r.sandboxed(t) // as the daemon runs it
	}
	r.sb = spec.Sandbox
	s, err := r.eng.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { drive.Close(t, s) })
	return s.(*terminal.Session)
}

func screenOf(s *terminal.Session) string {
	v, err := s.Terminal().Attach()
	if err != nil {
		return "(no screen: " + err.Error() + ")"
	}
	defer v.Detach()
	e := term.NewEmulator(term.DefaultCols, term.DefaultRows, nil)
	defer e.Close()
	e.Write(v.Snapshot())
	return e.Text()
}

// TestTUITurns runs the real TUI in a fresh folder (its trust saved by
// troupe before the sandboxed CLI starts: TestTUIStartDialogs), a turn is answered from the transcript, troupe's MCP tools are
// reachable as in structured mode, a slow turn is interrupted, and Close
// ends the program by /exit with its registry file removed.
func TestTUITurns(t *testing.T) {
	t.Parallel()
	r := tuiRig(t, nil)
	mcp := newFakeMCP(t)
	// Claude Code defers MCP tools behind ToolSearch; the fake model can
	// only call offered tools.
	a := troupe.AgentSpec{Env: map[string]string{"ENABLE_TOOL_SEARCH": "false"}}
	s := r.startTUI(t, a, engine.StartSpec{MCP: engine.MCPAccess{URL: mcp.URL, Token: "tok-tui"}})
	id := drive.SessionID(t, s)

	evs, end := drive.RunTurn(t, s, "t1", "[[text:Hello from the TUI.]]")
	if end.Error != "" || end.Text != "Hello from the TUI." {
		t.Fatalf("turn 1 ended %+v; screen:\n%s", end, screenOf(s))
	}
	if len(evs) == 0 || evs[0].Kind != engine.EventOutput {
		t.Errorf("turn 1 events %+v, want its output", evs)
	}
	if !term.Contains(screenOf(s), "● Hello from the TUI.") {
		t.Errorf("the screen lacks the answer:\n%s", screenOf(s))
	}

	// troupe's tools through MCP, as in structured mode: the fake MCP's
	// list_agents, called by the model.
	_, end = drive.RunTurn(t, s, "t2", `[[tool:mcp__troupe__list_agents {}]]`)
	if end.Error != "" || !strings.Contains(end.Text, "agents: alice, bob") {
		t.Fatalf("turn 2 (MCP) ended %+v; screen:\n%s", end, screenOf(s))
	}
	if got := mcp.Auth(); got != "Bearer tok-tui" {
		t.Errorf("MCP Authorization = %q", got)
	}

	// A turn held by the model, interrupted.
	if err := s.Send(context.Background(), enginetest.Input("t3", "[[text:slow...]] [[slow:1h every 1h]]")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := r.model.WaitRequests(ctx, len(r.model.Requests())+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	if _, end := drive.UntilEnd(t, s, "t3"); end.Error != "interrupted" {
		t.Fatalf("turn 3 ended %+v, want interrupted", end)
	}

	// The registry file is there while it runs and gone after /exit; in
	// a bubblewrap sandbox, in the agent's own folder, not the person's.
	home, _ := lookup(r.env, "HOME")
	shared := filepath.Join(home, ".claude", "sessions")
	reg := registryFiles(t, r.registry(t), id)
	if len(reg) != 1 {
		t.Fatalf("registry files of session %s: %v", id, reg)
	}
	if r.registry(t) != shared {
		if in := registryFiles(t, shared, id); len(in) != 0 {
			t.Errorf("the sandboxed TUI wrote %v in the person's registry", in)
		}
	}
	drive.Close(t, s)
	if s.Err() != nil {
		t.Errorf("Err after Close = %v", s.Err())
	}
	if err := s.ExitErr(); err != nil {
		t.Errorf("the TUI exited with %v, want status 0 (its own /exit, not the escalation's signals)", err)
	}
	if _, err := os.Stat(reg[0]); !os.IsNotExist(err) {
		t.Errorf("registry file %s still there after Close (err %v): not a clean exit", reg[0], err)
	}
}

func registryFiles(t *testing.T, dir, id string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []string
	for _, f := range files {
		if e, ok := readEntry(f); ok && e.SessionID == id {
			out = append(out, f)
		}
	}
	return out
}

// TestTUIStartDialogs: a folder never trusted and a key never approved.
// Outside the sandbox the CLI shows its trust and API-key dialogs, the
// driver answers them and the CLI saves the answers in ~/.claude.json. In
// the sandbox the CLI cannot save that file (HOME is read-only there), so
// troupe saves the same answers before it starts, under the CLI's lock:
// the turn is answered and the file keeps them, and its other keys.
func TestTUIStartDialogs(t *testing.T) {
	t.Parallel()
	for _, sandboxed := range []bool{true, false} {
		t.Run(map[bool]string{true: "sandboxed", false: "unsandboxed"}[sandboxed], func(t *testing.T) {
			t.Parallel()
			r := tuiRig(t, func(home string) {
				p := filepath.Join(home, ".claude.json")
				b, _ := os.ReadFile(p)
				var cfg map[string]any
				json.Unmarshal(b, &cfg)
				delete(cfg, "customApiKeyResponses")
				b, _ = json.Marshal(cfg)
				os.WriteFile(p, b, 0o600)
			})
			r.unsandboxed = !sandboxed
			s := r.startTUI(t, troupe.AgentSpec{}, engine.StartSpec{})
			drive.SessionID(t, s)
			_, end := drive.RunTurn(t, s, "t1", "[[text:key accepted]]")
			if end.Error != "" || end.Text != "key accepted" {
				t.Fatalf("turn ended %+v; screen:\n%s", end, screenOf(s))
			}
			home, _ := lookup(r.env, "HOME")
			b, _ := os.ReadFile(filepath.Join(home, ".claude.json"))
			var cfg struct {
				Onboarded bool `json:"hasCompletedOnboarding"`
				Keys      struct {
					Approved []string `json:"approved"`
				} `json:"customApiKeyResponses"`
				Projects map[string]struct {
					Trusted bool `json:"hasTrustDialogAccepted"`
				} `json:"projects"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatalf("~/.claude.json: %v: %.300s", err, b)
			}
			cwd, _ := filepath.EvalSymlinks(r.dir)
			if !cfg.Onboarded || !slices.Contains(cfg.Keys.Approved, claudetest.APIKey) || !cfg.Projects[cwd].Trusted {
				t.Errorf("~/.claude.json lacks the onboarding, the key's approval or the folder's trust: %.600s", b)
			}
		})
	}
}

// TestTUIUnknownDialog: a dialog troupe does not know (Bypass Permissions'
// warning, its "accept" not pre-seeded) leaves the agent blocked with the
// screen in the event, and no turn runs; once the person answers it
// (attached), the agent goes on.
func TestTUIUnknownDialog(t *testing.T) {
	t.Parallel()
	r := tuiRig(t, func(home string) {
		os.Remove(filepath.Join(home, ".claude", "settings.json")) // skipDangerousModePermissionPrompt
	})
	s := r.startTUI(t, troupe.AgentSpec{PermissionMode: "bypassPermissions"}, engine.StartSpec{})
	drive.SessionID(t, s)
	if err := s.Send(context.Background(), enginetest.Input("t1", "[[text:after the dialog]]")); err != nil {
		t.Fatal(err)
	}
	ev, ok := drive.Next(t, s)
	if !ok || ev.Kind != engine.EventBlocked || !term.Contains(ev.Text, "Bypass Permissions mode") {
		t.Fatalf("event %+v (open %v), want blocked with the dialog; screen:\n%s", ev, ok, screenOf(s))
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Errorf("%d model requests while blocked", n)
	}
	// The person answers: Down to "Yes, I accept", Enter.
	v, err := s.Terminal().Attach()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := v.Type(ctx, []byte("\x1b[B")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the TUI's key handling: a person types at this pace
	if err := v.Type(ctx, []byte("\r")); err != nil {
		t.Fatal(err)
	}
	v.Detach()
	until := time.Now().Add(patience)
	for { // blocked events again while the screen changes, then unblocked
		ev, ok = drive.Next(t, s)
		if time.Now().After(until) {
			t.Fatalf("still blocked %v after the answer; screen:\n%s", patience, screenOf(s))
		}
		if !ok || ev.Kind != engine.EventBlocked {
			t.Fatalf("event %+v (open %v), want unblocked", ev, ok)
		}
		if ev.Text == "" {
			break
		}
	}
	_, end := drive.UntilEnd(t, s, "t1")
	if end.Error != "" || end.Text != "after the dialog" {
		t.Fatalf("turn ended %+v; screen:\n%s", end, screenOf(s))
	}
}

// TestTUIContract runs the Session contract suite on the TUI. The TUI
// writes an answer's text to its transcript once the text block is whole,
// so a hanging turn is a text block and then a Bash command that never ends
// (the turn runs until interrupted or closed).
func TestTUIContract(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, enginetest.Harness{
		Start: func(t *testing.T, _ []enginetest.Turn) engine.Session {
			r := newRig(t)
			// After an interrupted tool, the TUI sends the cancelled
			// tool's result with the next message: its markers decide.
			r.model.SetScript(func(req fakemodel.Request) fakemodel.Reply {
				if req.AfterTool && strings.Contains(req.Prompt, "[[") {
					req.AfterTool = false
				}
				return fakemodel.DefaultScript(req)
			})
			s := r.startTUI(t, troupe.AgentSpec{AllowedTools: []string{"Bash"}}, engine.StartSpec{})
			drive.SessionID(t, s)
			return s
		},
		Message: func(turn enginetest.Turn) string {
			switch turn.Kind {
			case enginetest.Hang:
				return `[[text:` + turn.Text + `]] [[tool:Bash {"command":"tail -f /dev/null"}]]`
			case enginetest.Die:
				// The kill waits for the turn's text in the transcript
				// (bounded at 20 s): the TUI writes its transcript lines a
				// moment after it shows them, and a process killed at once
				// loses the last ones (a fixed second was not enough under
				// load). SIGSEGV, a crash: in a bubblewrap sandbox the TUI
				// is pid 1 of its pid namespace, which ignores a SIGKILL
				// from inside.
				wait := `for i in $(seq 200); do grep -qsF '` + turn.Text + `' ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/*/*.jsonl && break; sleep 0.1; done; `
				return `[[text:` + turn.Text + `]] [[tool:Bash {"command":"` + wait + `kill -SEGV $PPID"}]]`
			default:
				return "[[text:" + turn.Text + "]]"
			}
		},
		Patience: patience,
	})
}

// TestTUIPermissionPromptBlocks: a tool the agent may not use without
// asking shows Claude Code's permission prompt on its screen (registry
// status "waiting"): the agent is blocked, never idle, until the person
// answers on the terminal; then the turn goes on and ends.
func TestTUIPermissionPromptBlocks(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.startTUI(t, troupe.AgentSpec{PermissionMode: "default"}, engine.StartSpec{})
	drive.SessionID(t, s)
	// In a folder of the workspace: under Landlock its top level, which
	// holds read-only paths (.claude/, .troupe/), takes no new entry.
	if err := os.Mkdir(filepath.Join(r.dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	msg := `[[tool:Bash {"command":"echo hi-from-bash > work/out.txt && cat work/out.txt","description":"write a file"}]]`
	if err := s.Send(context.Background(), enginetest.Input("t1", msg)); err != nil {
		t.Fatal(err)
	}
	// Blocked at once ("waiting" comes a moment before the prompt is
	// drawn), then reported again with the prompt on the screen.
	deadline := time.Now().Add(patience)
	for {
		ev, ok := drive.Next(t, s)
		if time.Now().After(deadline) {
			t.Fatalf("no blocked event showing the prompt in %v; the last: %+v", patience, ev)
		}
		if !ok || ev.Kind == engine.EventTurnEnd || ev.Kind == engine.EventBlocked && ev.Text == "" {
			t.Fatalf("event %+v (open %v) before the permission prompt showed; screen:\n%s", ev, ok, screenOf(s))
		}
		if ev.Kind == engine.EventBlocked && !strings.Contains(ev.Text, "(permission prompt)") {
			t.Fatalf("blocked event %q, want it to say Claude Code waits on a permission prompt", ev.Text)
		}
		if ev.Kind == engine.EventBlocked && term.Contains(ev.Text, "Do you want to proceed?") {
			break
		}
	}
	// The person answers "1. Yes". A key the TUI takes while it is still
	// drawing the prompt can be lost (it drops keys that come too soon):
	// the person presses it again while the prompt stays on the screen.
	answer := func() time.Time {
		v, err := s.Terminal().Attach()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Detach()
		if err := v.Type(context.Background(), []byte("1")); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	typed := answer()
	deadline = time.Now().Add(patience)
	var unblocked bool
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the turn did not end within %v of the answer; screen:\n%s", patience, screenOf(s))
		}
		// A dropped key leaves the prompt as it was: no event comes (the
		// screen does not change). Looked at every 3 s: still there, the
		// person presses the key again.
		var ev engine.Event
		var ok bool
		select {
		case ev, ok = <-s.Events():
		case <-time.After(3 * time.Second):
			if !unblocked && term.Contains(screenOf(s), "Do you want to proceed?") {
				typed = answer()
			}
			continue
		}
		if !ok {
			t.Fatalf("events closed: %v", s.Err())
		}
		if ev.Kind == engine.EventBlocked && ev.Text == "" {
			unblocked = true
		}
		if ev.Kind == engine.EventBlocked && !unblocked && term.Contains(ev.Text, "Do you want to proceed?") && time.Since(typed) > 3*time.Second {
			typed = answer()
		}
		if ev.Kind == engine.EventTurnEnd {
			if !unblocked || ev.Error != "" || !strings.Contains(ev.Text, "hi-from-bash") {
				t.Fatalf("after the prompt: unblocked %v, turn end %+v", unblocked, ev)
			}
			return
		}
	}
}

// TestScreenState reads the TUI's state off the captured screens, for a
// registry file without status (2.1.197).
func TestScreenState(t *testing.T) {
	for file, want := range map[string]terminal.State{
		"21_v2.1.197_main.txt":          terminal.Idle,
		"04_main_prompt.txt":            terminal.Idle,
		"06_busy.txt":                   terminal.Busy,
		"15_bash_permission_prompt.txt": terminal.Blocked,
		"19_bypass_dialog.txt":          terminal.Blocked,
		"01_first_screen.txt":           terminal.Starting,
	} {
		// Copied from ../shared/fixtures/claude-code/tui/screens.
		b, err := os.ReadFile(filepath.Join("testdata", "screens", file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got := screenState(string(b)).State; got != want {
			t.Errorf("%s: state %v, want %v", file, got, want)
		}
	}
}

// TestTUIResume: a new session given the conversation id the first one
// reported continues that conversation (--resume): the model sees the
// earlier exchange; an id without a transcript starts a new one.
func TestTUIResume(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.startTUI(t, troupe.AgentSpec{}, engine.StartSpec{})
	id := drive.SessionID(t, s)
	if _, end := drive.RunTurn(t, s, "t1", "[[text:the word is heliotrope]]"); end.Error != "" {
		t.Fatalf("turn 1: %+v", end)
	}
	drive.Close(t, s)

	s2 := r.startTUI(t, troupe.AgentSpec{}, engine.StartSpec{Resume: id})
	if got := drive.SessionID(t, s2); got != id {
		t.Fatalf("resumed session reports %s, want %s", got, id)
	}
	if _, end := drive.RunTurn(t, s2, "t2", "[[text:resumed]]"); end.Error != "" || end.Text != "resumed" {
		t.Fatalf("turn 2: %+v", end)
	}
	reqs := r.model.Requests()
	last := reqs[len(reqs)-1]
	msgs, _ := last.Body["messages"].([]any)
	body := fmt.Sprint(msgs)
	if !strings.Contains(body, "heliotrope") {
		t.Errorf("the resumed conversation's request lacks the first turn (%d messages)", len(msgs))
	}

	s3 := r.startTUI(t, troupe.AgentSpec{}, engine.StartSpec{Resume: "00000000-0000-4000-8000-000000000000"})
	if got := drive.SessionID(t, s3); got == "00000000-0000-4000-8000-000000000000" {
		t.Errorf("an id without a transcript was resumed")
	}
}

// TestPrivateRegistry: under bubblewrap a sandboxed CLI gets the agent's
// own registry folder, emptied, bound over <config>/sessions; under
// Landlock, or unsandboxed, the shared one.
func TestPrivateRegistry(t *testing.T) {
	cfg, private := filepath.Join(t.TempDir(), ".claude"), t.TempDir()
	own := filepath.Join(private, "claude-sessions")
	for _, d := range []string{own, cfg} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	stale := filepath.Join(own, "1.json") // a killed CLI's
	if err := os.WriteFile(stale, []byte(`{"pid":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &sandbox.Policy{On: true, Mechanism: sandbox.Bubblewrap, Private: private}
	got, err := privateRegistry(p, cfg)
	if err != nil || got != own {
		t.Fatalf("bubblewrap: %q, %v; want %q", got, err, own)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale file is still there (%v)", err)
	}
	if want := []sandbox.Bind{{Source: own, Target: filepath.Join(cfg, "sessions")}}; !slices.Equal(p.Binds, want) {
		t.Errorf("binds %+v, want %+v", p.Binds, want)
	}
	if fi, err := os.Stat(filepath.Join(cfg, "sessions")); err != nil || !fi.IsDir() {
		t.Errorf("the bind's target is not made: %v", err)
	}
	for _, p := range []*sandbox.Policy{nil, {On: true, Mechanism: sandbox.Landlock, Private: private}, {On: true, Mechanism: sandbox.Bubblewrap}} {
		if got, err := privateRegistry(p, cfg); err != nil || got != filepath.Join(cfg, "sessions") || p != nil && len(p.Binds) != 0 {
			t.Errorf("%+v: %q, %v; want the shared folder, no bind", p, got, err)
		}
	}
}

// TestInSession finds a child in its own session (as the terminal's
// program is: the pty starts it with setsid) by that session, its pid in
// its own pid namespace (here the machine's) and its start time, and
// nothing when one of them differs. It does not use the test's own
// session: under a container's init that session's id can be 0.
func TestInSession(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	sid, start := pid, st.StartString()
	if !inSession(sid, pid, start) {
		t.Fatalf("inSession(%d, %d, %s) = false for a child leading its session", sid, pid, start)
	}
	for _, c := range []struct {
		sid, pid int
		start    string
	}{{sid + 1, pid, start}, {sid, pid + 1, start}, {sid, pid, start + "0"}, {os.Getpid(), pid, start}} {
		if inSession(c.sid, c.pid, c.start) {
			t.Errorf("inSession(%d, %d, %s) = true", c.sid, c.pid, c.start)
		}
	}
}

// TestTUIResize: a person's window size reaches the TUI in its sandbox
// (where it is pid 1 of its pid namespace, which gets only the signals it
// handles): SIGWINCH makes it redraw its prompt's rules to the new width,
// wider than the terminal's default (a narrower one could be the old rules
// cut).
func TestTUIResize(t *testing.T) {
	t.Parallel()
	r := tuiRig(t, nil)
	s := r.startTUI(t, troupe.AgentSpec{}, engine.StartSpec{})
	drive.SessionID(t, s)
	if _, end := drive.RunTurn(t, s, "t1", "[[text:before the resize]]"); end.Error != "" {
		t.Fatalf("turn ended %+v", end)
	}
	const cols, rows = term.DefaultCols + 30, term.DefaultRows
	rule := strings.Repeat("─", cols)
	v, err := s.Terminal().Attach()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Detach()
	e := term.NewEmulator(cols, rows, nil)
	defer e.Close()
	if err := v.Resize(cols, rows); err != nil {
		t.Fatal(err)
	}
	e.Write(v.Snapshot())
	timeout := time.After(patience)
	for !slices.ContainsFunc(strings.Split(e.Text(), "\n"), func(l string) bool { return strings.TrimSpace(l) == rule }) {
		select {
		case b, ok := <-v.Output():
			if !ok {
				t.Fatalf("detached: %s", v.Reason())
			}
			e.Write(b)
		case <-timeout:
			t.Fatalf("no %d-column rule %v after the resize; screen:\n%s", cols, patience, e.Text())
		}
	}
}

// TestTUIToolCallsAndLimit: the TUI's own tool calls come from its
// transcript as events (a Bash call with its timeout as its limit, then
// its result: the runtime counts the call in flight as activity), and a
// model request refused with 429 ends the turn failed, with a Limit (the
// runtime waits for the reset and runs it again).
func TestTUIToolCallsAndLimit(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.startTUI(t, troupe.AgentSpec{PermissionMode: "bypassPermissions"}, engine.StartSpec{})
	drive.SessionID(t, s)
	evs, end := drive.RunTurn(t, s, "t1", `[[tool:Bash {"command":"sleep 1; echo slept","timeout":30000,"description":"sleeps"}]]`)
	if end.Error != "" || !strings.Contains(end.Text, "slept") {
		t.Fatalf("turn 1 ended %+v; screen:\n%s", end, screenOf(s))
	}
	var call, result *engine.ToolUse
	for _, ev := range evs {
		switch {
		case ev.Kind == engine.EventToolCall && ev.Tool.Name == "Bash":
			call = ev.Tool
		case ev.Kind == engine.EventToolResult && call != nil && ev.Tool.ID == call.ID:
			result = ev.Tool
		}
		if (ev.Kind == engine.EventToolCall || ev.Kind == engine.EventToolResult) && ev.Turn != "t1" {
			t.Errorf("tool event of turn %q, want t1", ev.Turn)
		}
	}
	if call == nil || call.Limit != 30*time.Second || result == nil {
		t.Fatalf("tool events: call %+v, result %+v; want the Bash call with its 30 s limit, then its result (events %+v)", call, result, evs)
	}
	_, end = drive.RunTurn(t, s, "t2", "busy [[limit:5s]]")
	if end.Limit == nil || !strings.Contains(end.Error, "usage or rate limit") || end.Text != "" {
		t.Fatalf("turn 2 ended %+v (limit %v), want failed on a limit; screen:\n%s", end, end.Limit, screenOf(s))
	}
	if _, end = drive.RunTurn(t, s, "t3", "[[text:after]]"); end.Error != "" || end.Limit != nil || end.Text != "after" {
		t.Fatalf("turn 3 ended %+v, want answered without a limit", end)
	}
}
