package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/engine/claude/claudetest"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// terminalTeam mixes a Claude agent in terminal mode (its TUI on a PTY),
// a generic terminal agent (a scripted shell REPL) and a structured
// scripted helper.
const terminalTeam = `
[[agent]]
name = "tui"
engine = "claude"
mode = "terminal"
command = %[1]q
permission_mode = "acceptEdits"
env = { ENABLE_TOOL_SEARCH = "false" }

[[agent]]
name = "repl"
engine = "terminal"
command = "/bin/sh"
args = [%[2]q]

[agent.terminal]
idle = "repl>"
busy = "working..."

[[agent]]
name = "helper"
engine = "fake"

[agent.fake]
respond = "!say helper knows: {text}"
`

const termREPL = `printf 'repl> '
while IFS= read -r line; do
  case "$line" in
    size) echo "size is $(stty size)";;
    *) printf 'working...'; sleep 0.2; printf '\r\033[K'
       echo "repl heard: $line" | tr a-z A-Z;;
  esac
  printf 'repl> '
done`

// TestTerminalAgents runs a team mixing terminal and structured agents in
// the daemon, each sandboxed (by default), under bubblewrap and under
// Landlock: the person asks the Claude TUI agent, which calls troupe's
// ask_agent (MCP, as in structured mode) on the helper; the generic REPL
// answers through its patterns; the person attaches to the TUI over the
// API's WebSocket and sees its screen.
func TestTerminalAgents(t *testing.T) {
	for _, m := range []sandbox.Mechanism{sandbox.Bubblewrap, sandbox.Landlock} {
		t.Run(string(m), func(t *testing.T) { testTerminalAgents(t, m) })
	}
}

// needMechanism skips the test (fails it under CI=true) when mechanism
// cannot run here.
func needMechanism(t *testing.T, mechanism sandbox.Mechanism) {
	t.Helper()
	r := sandbox.Detect()
	if r.Mechanism == sandbox.None || mechanism == sandbox.Bubblewrap && r.Bwrap == "" || mechanism == sandbox.Landlock && r.LandlockABI == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s here: %s", mechanism, r.Why)
		}
		t.Skipf("no %s here: %s", mechanism, r.Why)
	}
}

func testTerminalAgents(t *testing.T, mechanism sandbox.Mechanism) {
	needMechanism(t, mechanism)
	bin := claudetest.Bin(t)
	model := startModel(t)
	state, proj := t.TempDir(), filepath.Join(t.TempDir(), "app")
	script := filepath.Join(t.TempDir(), "repl.sh")
	if err := os.WriteFile(script, []byte(termREPL), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTeam(t, proj, fmt.Sprintf(terminalTeam, bin, script))
	env := append(claudetest.Env(t, claudetest.Home(t, proj), model.URL()), sandbox.MechanismEnv+"="+string(mechanism))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := startDaemonEnv(t, state, env, "--project", proj)
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, proj)
	})
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(agent troupe.AgentID, text string) string {
		t.Helper()
		req, err := cl.Ask(ctx, p.ID, agent, text, 0)
		if err != nil {
			t.Fatalf("ask %s: %v", agent, err)
		}
		if req.State != troupe.ReqAnswered {
			t.Fatalf("ask %s %q = %s: %s", agent, text, req.State, req.Error)
		}
		return req.Answer
	}

	if got := ask("tui", "[[text:Hello from the TUI agent.]]"); got != "Hello from the TUI agent." {
		t.Errorf("tui answered %q", got)
	}
	got := ask("tui", `[[tool:mcp__troupe__ask_agent {"to":"helper","question":"ping?"}]]`)
	if !strings.Contains(got, "helper knows: ping?") {
		t.Errorf("tui's ask_agent of helper gave %q", got)
	}
	if got := ask("repl", "hello repl"); !strings.Contains(got, "REPL HEARD:") || !strings.Contains(got, "HELLO REPL") {
		t.Errorf("repl answered %q", got)
	}

	// Attach to the TUI: the first message redraws its screen.
	a, err := cl.AttachTerminal(ctx, p.ID, "tui")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Cols != term.DefaultCols || a.Rows != term.DefaultRows {
		t.Errorf("attached to a %d×%d terminal", a.Cols, a.Rows)
	}
	snap, err := a.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := term.NewEmulator(a.Cols, a.Rows, nil)
	defer e.Close()
	e.Write(snap)
	if !term.Contains(e.Text(), "Hello from the TUI agent.") && !term.Contains(e.Text(), "helper knows") {
		t.Errorf("the attached screen shows neither answer:\n%s", e.Text())
	}
	if _, err := cl.AttachTerminal(ctx, p.ID, "helper"); err == nil || !strings.Contains(err.Error(), "not in terminal mode") {
		t.Errorf("attach to a structured agent: %v", err)
	}
	agents, err := cl.Agents(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		if !a.Sandboxed {
			t.Errorf("agent %s (%s, %s mode) runs unsandboxed", a.Name, a.Engine, a.Mode)
		}
	}
}

// TestAttachCLI runs `troupe attach` on a terminal of its own (as a person
// would): it shows the agent's screen (starting its session), sends the
// person's keys and window size, detaches on Ctrl-] with exit status 0,
// and the agent keeps working afterwards.
func TestAttachCLI(t *testing.T) {
	state, proj := t.TempDir(), filepath.Join(t.TempDir(), "app")
	script := filepath.Join(t.TempDir(), "repl.sh")
	if err := os.WriteFile(script, []byte(termREPL), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTeam(t, proj, fmt.Sprintf(`
[[agent]]
name = "repl"
engine = "terminal"
command = "/bin/sh"
args = [%q]

[agent.terminal]
idle = "repl>"
busy = "working..."
`, script))
	d := startDaemon(t, state, "--project", proj)
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cli, err := term.Start(term.Options{Argv: []string{binary, "attach", "repl", "--project", proj, "--state-dir", state},
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, Cols: 100, Rows: 30, StopTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close(context.Background())
	wait := func(want string) {
		t.Helper()
		if s, err := cli.WaitFor(ctx, func(s term.Screen) bool { return term.Contains(s.All(), want) }); err != nil {
			t.Fatalf("waiting for %q on the attached terminal: %v; screen:\n%s", want, err, s.All())
		}
	}
	wait("repl>")
	if err := cli.Write(ctx, []byte("hello\r")); err != nil {
		t.Fatal(err)
	}
	wait("REPL HEARD: HELLO")
	if err := cli.Write(ctx, []byte("size\r")); err != nil {
		t.Fatal(err)
	}
	wait("size is 30 100") // the person's window size, not the agent's default
	// Ctrl-] detaches.
	if err := cli.Write(ctx, []byte{0x1d}); err != nil {
		t.Fatal(err)
	}
	wait("detached from repl")
	select {
	case <-cli.Done():
	case <-ctx.Done():
		t.Fatal("troupe attach still runs after Ctrl-]")
	}
	if err := cli.ExitErr(); err != nil {
		t.Errorf("troupe attach exited with %v", err)
	}

	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	req, err := cl.Ask(ctx, p.ID, "repl", "still there", 0)
	if err != nil || req.State != troupe.ReqAnswered || !strings.Contains(req.Answer, "STILL THERE") {
		t.Fatalf("ask after detaching = %+v, %v", req, err)
	}
}

// TestTerminalClaudeAgentsApart runs two Claude TUI agents of one name in
// two projects at once, sandboxed: each keeps its own session, found by
// its own driver, turn after turn. Under bubblewrap each TUI is pid 1 of
// its pid namespace and would write ~/.claude/sessions/1.json over the
// other's; there each writes its registry in a folder of its own
// (<state>/sandbox/<project>/<agent>/claude-sessions), none in the
// person's.
func TestTerminalClaudeAgentsApart(t *testing.T) {
	for _, m := range []sandbox.Mechanism{sandbox.Bubblewrap, sandbox.Landlock} {
		t.Run(string(m), func(t *testing.T) { testTerminalClaudeAgentsApart(t, m) })
	}
}

func testTerminalClaudeAgentsApart(t *testing.T, mechanism sandbox.Mechanism) {
	needMechanism(t, mechanism)
	bin := claudetest.Bin(t)
	model := startModel(t)
	state := t.TempDir()
	projs := []string{filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "two")}
	team := fmt.Sprintf("[[agent]]\nname = \"tui\"\nengine = \"claude\"\nmode = \"terminal\"\ncommand = %q\npermission_mode = \"acceptEdits\"\n", bin)
	for _, p := range projs {
		writeTeam(t, p, team)
	}
	home := claudetest.Home(t, projs...)
	env := append(claudetest.Env(t, home, model.URL()), sandbox.MechanismEnv+"="+string(mechanism))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := startDaemonEnv(t, state, env, "--project", projs[0], "--project", projs[1])
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, projs...)
	})
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]troupe.ProjectID, len(projs))
	for i, dir := range projs {
		p, err := cl.ResolveProject(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = p.ID
	}
	// Both at once, twice: the second turns need each driver to find its
	// TUI idle in its own registry file while the other TUI runs.
	for turn := range 2 {
		errs := make(chan error, len(ids))
		for i, p := range ids {
			go func() {
				want := fmt.Sprintf("project %d turn %d", i, turn)
				req, err := cl.Ask(ctx, p, "tui", "[[text:"+want+"]]", 0)
				switch {
				case err != nil:
					errs <- fmt.Errorf("ask project %d: %w", i, err)
				case req.State != troupe.ReqAnswered || req.Answer != want:
					errs <- fmt.Errorf("ask project %d turn %d: %s %q (%s)", i, turn, req.State, req.Answer, req.Error)
				default:
					errs <- nil
				}
			}()
		}
		for range ids {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	sessions := make([]string, len(ids))
	for i, p := range ids {
		agents, err := cl.Agents(ctx, p)
		if err != nil || len(agents) != 1 || agents[0].SessionID == "" || !agents[0].Sandboxed {
			t.Fatalf("agents of project %d: %+v, %v", i, agents, err)
		}
		sessions[i] = agents[0].SessionID
	}
	if sessions[0] == sessions[1] {
		t.Fatalf("both agents have session %s", sessions[0])
	}
	// Each session is named by one registry file: under bubblewrap in its
	// agent's own folder (and none in the person's), under Landlock in the
	// person's (with its real pid).
	shared := filepath.Join(home, ".claude", "sessions")
	for i, id := range sessions {
		dir := shared
		if mechanism == sandbox.Bubblewrap {
			dir = filepath.Join(state, "sandbox", string(ids[i]), "tui", "claude-sessions")
			if n := registryNaming(t, shared, id); n != 0 {
				t.Errorf("session %s of project %d: %d files in the person's registry", id, i, n)
			}
		}
		if n := registryNaming(t, dir, id); n != 1 {
			t.Errorf("session %s of project %d: %d files in %s, want 1", id, i, n, dir)
		}
	}
}

// registryNaming counts the registry files of dir whose sessionId is id.
func registryNaming(t *testing.T, dir, id string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		var e struct {
			SessionID string `json:"sessionId"`
		}
		if err == nil && json.Unmarshal(b, &e) == nil && e.SessionID == id {
			n++
		}
	}
	return n
}

// spinnerREPL answers "hang" by turning a spinner and counting seconds for
// ever: the seed's hung TUI.
const spinnerREPL = `printf 'repl> '
while IFS= read -r line; do
  case "$line" in *hang*) ;; *) printf 'working'; sleep 0.2; printf '\r\033[K'; echo "answered"; printf 'repl> '; continue;; esac
  i=0
  while :; do
    for f in '⠋' '⠙' '⠹' '⠸' '⠼' '⠴' '⠦' '⠧' '⠇' '⠏'; do
      printf '\r%s working (%ds)' "$f" "$i"; sleep 0.1
    done
    i=$((i+1))
  done
done`

// TestHungSpinnerIsCut (issue 22): a terminal agent that only animates a
// spinner and an elapsed-time counter is silent: the ask to it ends with
// no reply after one turn_timeout (3 s here), not at the 4 h ceiling.
func TestHungSpinnerIsCut(t *testing.T) {
	state, proj := t.TempDir(), filepath.Join(t.TempDir(), "app")
	script := filepath.Join(t.TempDir(), "spin.sh")
	if err := os.WriteFile(script, []byte(spinnerREPL), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTeam(t, proj, fmt.Sprintf(`
[[agent]]
name = "spinner"
engine = "terminal"
command = "/bin/sh"
args = [%q]
turn_timeout = "3s"

[agent.terminal]
idle = "repl>"
busy = "working"
`, script))
	ctx, _, cl, p := serveProject(t, state, proj, nil, time.Minute)
	// A first turn: a new session's first turn waits longer for its first
	// word (StartTimeout); the hang is the second.
	if req, err := cl.Ask(ctx, p.ID, "spinner", "hello", 0); err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("first ask = %+v, %v", req, err)
	}
	req, err := cl.Ask(ctx, p.ID, "spinner", "hang", 0)
	if err != nil {
		t.Fatal(err)
	}
	if req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "no reply from spinner") {
		t.Fatalf("ask to a spinning agent = %s %q (%q), want no reply after its turn_timeout; its log:\n%s", req.State, req.Error, req.Answer, mustTroupe(t, state, proj, "log", "spinner"))
	}
}

// TestTerminalBashAgent: bash itself as a generic terminal agent in the
// daemon, sandboxed: an ask is typed as its text alone (no framing, so no
// syntax error) and answered by what the command printed; a second agent's
// input template writes the sender and kind before the text.
func TestTerminalBashAgent(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash, the program this test runs as an agent: %v", err)
	}
	state, proj := t.TempDir(), filepath.Join(t.TempDir(), "app")
	writeTeam(t, proj, fmt.Sprintf(`
[[agent]]
name = "sh"
engine = "terminal"
command = %[1]q
args = ["--norc", "--noprofile"]
env = { PS1 = "bash$ ", HISTFILE = "/dev/null" }
[agent.terminal]
idle = "bash$"

[[agent]]
name = "framed"
engine = "terminal"
command = %[1]q
args = ["--norc", "--noprofile"]
env = { PS1 = "bash$ ", HISTFILE = "/dev/null" }
[agent.terminal]
idle = "bash$"
input = "echo '{from} {kind}:'; {text}"
`, bash))
	d := startDaemon(t, state, "--project", proj)
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		waitNoProcessIn(t, proj)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		agent troupe.AgentID
		want  string
	}{
		{"sh", "hello from 42"},
		{"framed", "person ask:\nhello from 42"},
	} {
		req, err := cl.Ask(ctx, p.ID, c.agent, "echo hello from $((6*7))", 0)
		if err != nil {
			t.Fatalf("ask %s: %v", c.agent, err)
		}
		if req.State != troupe.ReqAnswered || req.Answer != c.want {
			t.Errorf("ask %s = %s %q (%s), want the answer %q", c.agent, req.State, req.Answer, req.Error, c.want)
		}
	}
}
