package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// runnerProc is a `troupe runner` child in its own process group, with a
// HOME and a root of its own: nothing shared with the daemon but the link.
type runnerProc struct {
	cmd  *exec.Cmd
	root string
	logs *syncBuffer
	done chan struct{}
}

// startRunner mints runner name's credentials on the daemon of state (the
// first time) and starts it with a HOME of its own; it returns once the
// runner said hello.
func startRunner(t testing.TB, state, name, creds string, extra ...string) *runnerProc {
	t.Helper()
	home := t.TempDir()
	return startRunnerEnv(t, state, name, creds, append(os.Environ(), "HOME="+home), extra...)
}

// startRunnerEnv is startRunner with the runner's whole environment
// (its HOME among it); its state and root are folders of its own.
func startRunnerEnv(t testing.TB, state, name, creds string, env []string, extra ...string) *runnerProc {
	t.Helper()
	if _, err := os.Stat(creds); err != nil {
		if out, errOut, code := runCLI(t, state, "", "runner", "add", name, "-o", creds); code != 0 {
			t.Fatalf("runner add: %d\n%s%s", code, out, errOut)
		}
	}
	own := t.TempDir()
	r := &runnerProc{root: filepath.Join(own, "root"), logs: &syncBuffer{}, done: make(chan struct{})}
	args := append([]string{"runner", "--creds", creds, "--root", r.root, "--log-level", "debug"}, extra...)
	r.cmd = exec.Command(binary, args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.Env = append(env[:len(env):len(env)], "XDG_STATE_HOME="+filepath.Join(own, "state"))
	r.cmd.Stderr, r.cmd.Stdout = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	})
	if l := r.logs.waitFor(time.Minute, "connected to the daemon"); !strings.Contains(l, "connected to the daemon") {
		t.Fatalf("runner %s did not connect:\n%s", name, l)
	}
	return r
}

func (r *runnerProc) kill(t testing.TB) {
	t.Helper()
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

const runnerTeam = `
[[agent]]
name = "lead"
engine = "fake"

[[agent]]
name = "coder"
engine = "fake"
runner = "r1"
allowed_tools = ["Bash"]
`

// TestRunnerRemoteAgent: a daemon and a runner as two processes with
// nothing shared but the bus. The runner's agent works in its own clone of
// the project (not the daemon's folder), a local agent's ask_agent reaches
// it, its own ask_agent and shell go through the link (its MCP calls with
// its session's token; its shell approved by the team's allowed_tools),
// and a runner killed mid-turn fails that turn with the reason, the
// next message running once it is back.
func TestRunnerRemoteAgent(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, runnerTeam)
	ctx, d, cl, p := serveProject(t, state, proj, append(os.Environ(), "HOME="+t.TempDir()), 3*time.Minute,
		"--runners", "127.0.0.1:0", "--runner-beat", "1s")
	creds := filepath.Join(t.TempDir(), "r1.creds")
	r := startRunner(t, state, "r1", creds)

	ask := func(agent, text string) troupe.Request {
		t.Helper()
		res, err := cl.Ask(ctx, p.ID, troupe.AgentID(agent), text, 0)
		if err != nil {
			t.Fatalf("ask %s: %v\ndaemon:\n%s\nrunner:\n%s", agent, err, d.logs.String(), r.logs.String())
		}
		return res
	}
	res := ask("coder", "!cwd")
	want := filepath.Join(r.root, string(p.ID), "repo", "troupe", "worktrees", "coder")
	if res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, want) {
		t.Fatalf("coder's cwd: %+v, want %s\nrunner:\n%s", res, want, r.logs.String())
	}
	res = ask("lead", "!ask coder !sh echo made on the runner > made.txt; cat README\n!say lead got: {result}")
	if !strings.Contains(res.Answer, "lead got:") || !strings.Contains(res.Answer, "hello") {
		t.Fatalf("lead's answer: %+v\nrunner:\n%s", res, r.logs.String())
	}
	if b, err := os.ReadFile(filepath.Join(want, "made.txt")); err != nil || string(b) != "made on the runner\n" {
		t.Errorf("the coder's file on the runner: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(proj, "made.txt")); err == nil {
		t.Error("the coder's file landed in the daemon's project folder")
	}
	// The runner's credentials are hidden from its agents: one that read
	// them could speak for the runner, and so for its other agents.
	if res := ask("coder", "!sh cat "+creds+"; echo read-done"); !strings.Contains(res.Answer, "read-done") || strings.Contains(res.Answer, "secret:") {
		t.Errorf("the coder reading the runner's credentials: %q", res.Answer)
	}
	// The turn's files came back: the daemon's diff and checkpoint of
	// the agent show them, as for a local worktree agent.
	if out, errOut, code := runCLI(t, state, proj, "diff", "coder"); code != 0 || !strings.Contains(out, "+made on the runner") {
		t.Errorf("troupe diff coder: %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, state, proj, "checkpoints", "coder"); code != 0 || !strings.Contains(out, "+1 −0") {
		t.Errorf("troupe checkpoints coder: %d\n%s%s", code, out, errOut)
	}

	// A runner killed mid-turn: the agent is unreachable, naming its
	// runner; the turn's message waits, as does a new ask, answered at
	// once with the reason; the rest of the team goes on.
	errc := make(chan error, 1)
	var got troupe.Request
	go func() {
		var err error
		got, err = cl.Ask(ctx, p.ID, "coder", "!sleep 5s\n!say slept", 0)
		errc <- err
	}()
	waitAgent(t, cl, p.ID, "coder", troupe.StateBusy)
	r.kill(t)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got.State != troupe.ReqPending || !strings.Contains(got.Unreachable, "unreachable (runner r1, since") {
		t.Fatalf("ask whose runner died mid-turn: %+v", got)
	}
	waitAgent(t, cl, p.ID, "coder", troupe.StateUnreachable)
	later := ask("coder", "later")
	if later.State != troupe.ReqPending || !strings.Contains(later.Unreachable, "runner r1") {
		t.Fatalf("ask to an unreachable agent: %+v", later)
	}
	if res := ask("lead", "still here"); res.State != troupe.ReqAnswered {
		t.Fatalf("the local agent while the runner is gone: %+v", res)
	}

	// Back: both questions run, in order, and are answered.
	r = startRunner(t, state, "r1", creds)
	for _, q := range []struct {
		id   troupe.RequestID
		want string
	}{{got.ID, "slept"}, {later.ID, "echo: later"}} {
		var res troupe.Request
		waitFor(t, ctx, cl, "request "+string(q.id), func() bool {
			var err error
			if res, err = cl.Request(ctx, p.ID, q.id, 0); err != nil {
				t.Fatal(err)
			}
			return res.State != troupe.ReqPending
		})
		if res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, q.want) {
			t.Fatalf("request %s after the runner came back: %+v\nrunner:\n%s", q.id, res, r.logs.String())
		}
	}
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// restartableRunnerDaemon returns start, which starts a daemon serving
// proj on state with the runners' bus on a loopback port fixed for the
// test, and runners' beats of 1 s, and returns it with its client: called
// again after the daemon was killed, it starts it again where its runners
// reconnect.
func restartableRunnerDaemon(t *testing.T, state, proj string) (start func() (*daemon, *client.Client)) {
	env := append(os.Environ(), "HOME="+t.TempDir())
	args := []string{"--project", proj, "--runners", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--runner-beat", "1s"}
	return func() (*daemon, *client.Client) {
		t.Helper()
		d := startDaemonEnv(t, state, env, args...)
		cl, err := client.FromStateDir(state)
		if err != nil {
			t.Fatal(err)
		}
		return d, cl
	}
}

// TestRunnerDaemonKilledMidTurn: the daemon is SIGKILLed while its agent
// on a runner is in a turn. The runner keeps running and reconnects to
// the daemon started again on the same state; the turn's message, back in
// the inbox, runs in a new session there and the person's ask is answered.
func TestRunnerDaemonKilledMidTurn(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, runnerTeam)
	start := restartableRunnerDaemon(t, state, proj)
	d, cl := start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	r := startRunner(t, state, "r1", filepath.Join(t.TempDir(), "r1.creds"))
	req, err := cl.Ask(ctx, p.ID, "coder", "!sleep 2s\n!say slept", 0.001)
	if err != nil {
		t.Fatal(err)
	}
	waitAgent(t, cl, p.ID, "coder", troupe.StateBusy)
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done

	d, cl = start()
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	var res troupe.Request
	waitFor(t, ctx, cl, "the ask to be answered", func() bool {
		if res, err = cl.Request(ctx, p.ID, req.ID, 0); err != nil {
			t.Fatal(err)
		}
		return res.State != troupe.ReqPending
	})
	if res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, "slept") {
		t.Fatalf("the ask after the daemon's SIGKILL: %+v\ndaemon:\n%s\nrunner:\n%s", res, d.logs.String(), r.logs.String())
	}
	if l := r.logs.String(); !strings.Contains(l, "closing a session the daemon no longer knows") {
		t.Errorf("the runner kept the killed daemon's session:\n%s", l)
	}
}

// TestC1_CopiedProjectsOnTwoRunners: a project and its copy (cp -r), the
// copy's coder moved to another runner: each lead's ask reaches its own
// project's coder, on its own runner, in its own clone; neither runner
// holds the other project.
func TestC1_CopiedProjectsOnTwoRunners(t *testing.T) {
	state := t.TempDir()
	a := gitProject(t, runnerTeam)
	b := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-r", a, b).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	writeTeam(t, b, strings.Replace(runnerTeam, `runner = "r1"`, `runner = "r2"`, 1))
	d := startDaemonEnv(t, state, append(os.Environ(), "HOME="+t.TempDir()),
		"--project", a, "--project", b, "--runners", "127.0.0.1:0", "--runner-beat", "1s")
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	roots := map[string]string{}
	for _, name := range []string{"r1", "r2"} {
		roots[name] = startRunner(t, state, name, filepath.Join(t.TempDir(), name+".creds")).root
	}
	for dir, runner := range map[string]string{a: "r1", b: "r2"} {
		p, err := cl.ResolveProject(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cl.Ask(ctx, p.ID, "lead", "!ask coder !cwd\n!say lead got: {result}", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(roots[runner], string(p.ID), "repo", "troupe", "worktrees", "coder")
		if res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, "lead got: "+want) {
			t.Fatalf("project %s's lead: %+v, want its coder on %s at %s", dir, res, runner, want)
		}
		other := map[string]string{"r1": "r2", "r2": "r1"}[runner]
		if _, err := os.Stat(filepath.Join(roots[other], string(p.ID))); err == nil {
			t.Errorf("runner %s holds project %s, which runs on %s", other, p.ID, runner)
		}
	}
}
