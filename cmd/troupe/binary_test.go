package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/fakemodel"
	"github.com/troupe-dev/troupe/internal/procstat"
	"golang.org/x/sys/unix"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "troupe-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "troupe")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build troupe: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a `troupe serve` child in its own process group.
type daemon struct {
	t     testing.TB
	cmd   *exec.Cmd
	state string
	addr  string
	login string
	done  chan struct{} // closed when the process has been reaped
	err   error         // Wait's result, set before done is closed
	logs  *syncBuffer   // the daemon's stderr
}

// syncBuffer is a stderr sink that may be read while the child writes.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	cond *sync.Cond // broadcast at each write; L is &mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cond != nil {
		b.cond.Broadcast()
	}
	return b.buf.Write(p)
}

// waitFor returns the log once it holds every one of wants, or what it
// holds after patience. The child writes its log through a pipe that
// exec copies in: a line written before an event may land after it.
func (b *syncBuffer) waitFor(patience time.Duration, wants ...string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	expired := false
	timer := time.AfterFunc(patience, func() {
		b.mu.Lock()
		expired = true
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer timer.Stop()
	for {
		all := true
		for _, w := range wants {
			all = all && strings.Contains(b.buf.String(), w)
		}
		if all || expired {
			return b.buf.String()
		}
		b.cond.Wait()
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startDaemon runs `troupe serve` on a fresh port and waits for its ready
// line (no sleeping: the daemon prints it once it serves).
func startDaemon(t testing.TB, state string, extra ...string) *daemon {
	t.Helper()
	return startDaemonEnv(t, state, append(os.Environ(), "HOME="+t.TempDir()), extra...)
}

// startDaemonEnv is startDaemon with the daemon's whole environment.
func startDaemonEnv(t testing.TB, state string, env []string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"serve", "--state-dir", state, "--addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cmd: cmd, state: state, done: make(chan struct{}), logs: stderr}
	// A daemon that never gets ready fails the test instead of hanging it.
	stuck := time.AfterFunc(2*time.Minute, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stuck.Stop()
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		l := lines.Text()
		if a, ok := strings.CutPrefix(l, "troupe "); ok && strings.Contains(a, " ready on ") {
			d.addr = a[strings.LastIndex(a, " ")+1:]
		}
		if u, ok := strings.CutPrefix(l, "web UI: "); ok {
			d.login = u
			break
		}
	}
	go func() { io.Copy(io.Discard, stdout); d.err = cmd.Wait(); close(d.done) }()
	if d.login == "" {
		<-d.done
		t.Fatalf("daemon did not get ready; stderr:\n%s", stderr.String())
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // harmless when already gone
		<-d.done
	})
	return d
}

// stop sends sig and returns the exit error; it checks no process of the
// daemon's group is left.
func (d *daemon) stop(sig syscall.Signal) error {
	d.t.Helper()
	d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.t.Fatal("daemon did not stop within 10s of", sig)
	}
	pid := d.cmd.Process.Pid
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		// The daemon is reaped: a process with its pid is a new one (pids
		// wrap at pid_max on a busy machine), which may lead a group of
		// the same number. Nothing can be told of the daemon's group.
		d.t.Logf("pid %d was reused after the daemon stopped: its group is not checked", pid)
	} else if left := groupLeft(pid); len(left) > 0 {
		d.t.Errorf("processes of the daemon's group are left after it stopped: %s", strings.Join(left, "; "))
	}
	return d.err
}

// troupe runs the CLI against state and returns stdout, stderr and the exit code.
func runCLI(t testing.TB, state, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--state-dir", state}, args...)...)
	cmd.Dir = dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func mustTroupe(t testing.TB, state, dir string, args ...string) string {
	t.Helper()
	out, errs, code := runCLI(t, state, dir, args...)
	if code != 0 {
		t.Fatalf("troupe %v: exit %d: %s", args, code, errs)
	}
	return out
}

func writeTeam(t testing.TB, dir, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const twoAgents = `
[[agent]]
name = "lead"
engine = "fake"

[[agent]]
name = "researcher"
engine = "fake"
turn_timeout = "5m"
`

func TestBinaryServeProjectAgentsAndCleanStop(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, twoAgents)
	d := startDaemon(t, state)

	out := mustTroupe(t, state, proj, "project", "add")
	if !strings.Contains(out, "registered") || !strings.Contains(out, "2 agents") {
		t.Fatalf("project add said %q", out)
	}
	var agents []api.Agent
	if err := listJSON(mustTroupe(t, state, proj, "agents", "--json"), "agents", &agents); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range agents {
		names = append(names, string(a.Name)+":"+string(a.State)+":"+fmtDur(a.TurnTimeout))
	}
	if want := []string{"lead:stopped:10m0s", "researcher:stopped:5m0s"}; !slices.Equal(names, want) {
		t.Fatalf("agents = %v, want %v", names, want)
	}
	// --project from elsewhere, by path inside the project.
	sub := filepath.Join(proj, "src", "deep")
	os.MkdirAll(sub, 0o755)
	if out := mustTroupe(t, state, t.TempDir(), "agents", "--project", sub); !strings.Contains(out, "researcher") {
		t.Fatalf("agents --project SUBDIR: %q", out)
	}
	status := mustTroupe(t, state, proj, "status")
	if !strings.Contains(status, "running") || !strings.Contains(status, "projects: 1, agents: 2") {
		t.Fatalf("status = %q", status)
	}
	// Agents have live sessions: child processes in their own process groups.
	mustTroupe(t, state, proj, "ask", "lead", "hi")
	mustTroupe(t, state, proj, "ask", "researcher", "hi")
	kids := children(t, d.cmd.Process.Pid)
	if len(kids) < 2 {
		t.Fatalf("daemon has %d child processes, want the 2 agents' sessions", len(kids))
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v", err)
	}
	for _, pid := range kids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("agent process %d outlived the daemon's clean stop", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "addr")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("addr file left behind after a clean stop: %v", err)
	}
	// The CLI now says the daemon is not running, and how to start it.
	_, errs, code := runCLI(t, state, proj, "status")
	if code == 0 || !strings.Contains(errs, "not running") || !strings.Contains(errs, "troupe serve") {
		t.Fatalf("status without daemon: exit %d, stderr %q", code, errs)
	}
	if strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("error is not one line: %q", errs)
	}

	// Restart: the project is still registered (state in the database).
	d = startDaemon(t, state)
	if out := mustTroupe(t, state, proj, "project", "list", "--json"); !strings.Contains(out, proj) {
		t.Fatalf("project lost across restart: %s", out)
	}
	if err := d.stop(syscall.SIGINT); err != nil {
		t.Fatalf("daemon exit after SIGINT: %v", err)
	}
}

func fmtDur(d api.Duration) string { b, _ := d.MarshalText(); return string(b) }

func TestBinarySecondDaemonOnSameStateDirRefused(t *testing.T) {
	state := t.TempDir()
	d := startDaemon(t, state)
	cmd := exec.Command(binary, "serve", "--state-dir", state, "--addr", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second daemon started: %s", out)
	}
	if msg := string(out); !strings.Contains(msg, "another troupe daemon") || !strings.Contains(msg, fmt.Sprint(d.cmd.Process.Pid)) {
		t.Fatalf("second daemon said %q; want it to name the running daemon's pid", msg)
	}
	// And the processes that hold the lock, found in /proc (the pid in the
	// file is only the last daemon that took it).
	if msg := string(out); !strings.Contains(msg, fmt.Sprintf("the lock file is open in pid %d (", d.cmd.Process.Pid)) || !strings.Contains(msg, " serve ") {
		t.Fatalf("second daemon said %q; want it to name the process that has the lock file open", msg)
	}
	// The first one is unharmed.
	mustTroupe(t, state, t.TempDir(), "status")
	d.stop(syscall.SIGTERM)
}

func TestBinaryProjectAddErrors(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	startDaemon(t, state)
	file := filepath.Join(proj, "file.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(proj, link)
	mustTroupe(t, state, proj, "project", "add", link) // registered by its real path
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(proj, "nope"), "does not exist"},
		{file, "is not a directory"},
		{proj, "already registered"},
		{"/", "/ is the root of the file system, not a project"},
		{"/proc", "a file system the kernel makes up, not a project"},
	} {
		_, errs, code := runCLI(t, state, proj, "project", "add", c.path)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("project add %s: exit %d, stderr %q; want %q", c.path, code, errs, c.want)
		}
	}
	out := mustTroupe(t, state, proj, "project", "list", "--json")
	var ps []api.Project
	listJSON(out, "projects", &ps)
	if len(ps) != 1 || ps[0].Path != proj {
		t.Fatalf("projects = %+v; want one, at the real path %s", ps, proj)
	}
	mustTroupe(t, state, proj, "project", "remove")
	if out := mustTroupe(t, state, proj, "project", "list", "--json"); strings.Join(strings.Fields(out), "") != `{"projects":[]}` {
		t.Fatalf("after remove: %s", out)
	}
}

// TestBinaryFIFOTeamFileStallsNothing: a project whose team file is a FIFO
// (anything that writes into a project folder can put one there) is
// registered next to a good one: the daemon starts, the good project's
// agents answer, and the bad one shows a team error naming the FIFO; and
// so again when the daemon restarts with both registered.
func TestBinaryFIFOTeamFileStallsNothing(t *testing.T) {
	state, good, bad := t.TempDir(), t.TempDir(), t.TempDir()
	writeTeam(t, good, twoAgents)
	os.MkdirAll(filepath.Join(bad, ".troupe"), 0o755)
	fifo := filepath.Join(bad, ".troupe", "team.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if out := mustTroupe(t, state, good, "ask", "lead", "hi"); strings.TrimSpace(out) == "" {
			t.Fatal("the good project's agent gave no answer")
		}
		var ps []api.Project
		if err := listJSON(mustTroupe(t, state, good, "project", "list", "--json"), "projects", &ps); err != nil {
			t.Fatal(err)
		}
		var badErr string
		for _, p := range ps {
			if p.Path == bad {
				badErr = p.TeamError
			} else if p.TeamError != "" {
				t.Errorf("good project: team error %q", p.TeamError)
			}
		}
		if want := fifo + ": the team file is a named pipe (FIFO), not a regular file"; !strings.HasPrefix(badErr, want) {
			t.Fatalf("bad project's team error = %q, want it to start with %q", badErr, want)
		}
	}
	d := startDaemon(t, state, "--project", bad, "--project", good)
	check()
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, state) // both registered: loaded from the database
	check()
	d.stop(syscall.SIGTERM)
}

// TestBinaryCopiedProjectIsAnotherProject: a cp -r of a project, same team
// file, gets its own ProjectID (contract C1's premise).
func TestBinaryCopiedProjectIsAnotherProject(t *testing.T) {
	state, a := t.TempDir(), t.TempDir()
	writeTeam(t, a, twoAgents)
	b := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-r", a, b).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v %s", err, out)
	}
	startDaemon(t, state)
	mustTroupe(t, state, a, "project", "add")
	mustTroupe(t, state, b, "project", "add")
	var ps []api.Project
	listJSON(mustTroupe(t, state, a, "project", "list", "--json"), "projects", &ps)
	if len(ps) != 2 || ps[0].ID == ps[1].ID {
		t.Fatalf("projects = %+v; want two distinct ids", ps)
	}
	entries, _ := os.ReadDir(filepath.Join(b, ".troupe"))
	if len(entries) != 1 {
		t.Fatalf("troupe wrote into the project folder: %v", entries)
	}
}

func TestBinaryTeamReloadKeepsLastGoodTeam(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, twoAgents)
	startDaemon(t, state)
	mustTroupe(t, state, proj, "project", "add")
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, _ := cl.Status(ctx)
	waitTeamChange := func(since uint64) (teamChange, uint64) {
		var got teamChange
		last, err := cl.Events(ctx, since, nil, func(ev events.Event) error {
			if ev.Type != "team.changed" {
				return nil
			}
			json.Unmarshal(ev.Data, &got)
			return errStop
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("waiting for team.changed: %v", err)
		}
		return got, last
	}

	// A bad edit: the error names file, line and field; the old team stays.
	writeTeam(t, proj, twoAgents+"\n[[agent]]\nname = \"x\"\nengine = \"fake\"\nturn_timout = \"1m\"\n")
	ch, last := waitTeamChange(st.LastEvent)
	if !strings.Contains(ch.Error, "team.toml:") || !strings.Contains(ch.Error, "turn_timout") {
		t.Fatalf("bad edit reported %q; want file:line and the field", ch.Error)
	}
	out := mustTroupe(t, state, proj, "agents")
	if !strings.Contains(out, "researcher") {
		t.Fatalf("last good team lost: %s", out)
	}
	// A good edit: one agent changed (at once: a timeout), one added
	// (held for the person, C17), one kept.
	writeTeam(t, proj, strings.Replace(twoAgents, `"5m"`, `"7m"`, 1)+"\n[[agent]]\nname = \"critic\"\nengine = \"fake\"\n")
	ch, last = waitTeamChange(last)
	if ch.Error != "" || !slices.Equal(ch.Held, []string{"critic"}) || !slices.Equal(ch.Changed, []string{"researcher"}) || len(ch.Removed)+len(ch.Added) != 0 {
		t.Fatalf("good edit reported %+v; want held [critic], changed [researcher]", ch)
	}
	mustTroupe(t, state, proj, "team", "approve")
	ch, _ = waitTeamChange(last)
	if ch.Error != "" || !slices.Equal(ch.Added, []string{"critic"}) || len(ch.Changed)+len(ch.Removed) != 0 {
		t.Fatalf("approval reported %+v; want added [critic]", ch)
	}
	names := []string{}
	var agents []api.Agent
	listJSON(mustTroupe(t, state, proj, "agents", "--json"), "agents", &agents)
	for _, a := range agents {
		names = append(names, string(a.Name))
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"critic", "lead", "researcher"}) {
		t.Fatalf("agents after reload = %v", names)
	}
}

var errStop = errors.New("stop")

type teamChange struct {
	Added, Removed, Changed, Held []string
	Error                         string
}

// children lists the pids whose parent is pid.
func children(t testing.TB, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		self, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(self); err == nil && st.PPID == pid {
			out = append(out, self)
		}
	}
	return out
}

// groupLeft describes the processes of process group pgid that still
// run. A member that has exited but waits to be reaped (a zombie, or one
// in the middle of exiting, whose command line is already gone) is not
// left: when the daemon dies, a child it had not yet reaped passes to
// init, which reaps it when it gets to it. Each member still running is
// given 5 s, waited on its pidfd, to finish exiting.
func groupLeft(pgid int) []string {
	deadline := time.Now().Add(5 * time.Second)
	for _, m := range groupMembers(pgid) {
		if m.state == "Z" {
			continue
		}
		if fd, err := unix.PidfdOpen(m.pid, 0); err == nil {
			ms := max(int(time.Until(deadline).Milliseconds()), 0)
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
			unix.Close(fd)
		}
	}
	var left []string
	for _, m := range groupMembers(pgid) {
		if m.state != "Z" {
			left = append(left, fmt.Sprintf("pid %d (parent %d, state %s): %q", m.pid, m.ppid, m.state, m.cmdline))
		}
	}
	return left
}

// member is a process of a group, as /proc shows it.
type member struct {
	pid, ppid int
	state     string // R, S, D, Z...
	cmdline   string // arguments separated by spaces; empty once it exits
}

// groupMembers lists the processes of process group pgid, read from
// /proc.
func groupMembers(pgid int) []member {
	entries, _ := os.ReadDir("/proc")
	var out []member
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil || st.PGRP != pgid {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, member{pid: pid, ppid: st.PPID, state: string(st.State), cmdline: strings.ReplaceAll(string(cmd), "\x00", " ")})
	}
	return out
}

// serveProject starts a daemon on state with the environment env (nil:
// this process's) serving the project at proj, and resolves it: a context
// that ends at the test's end or after timeout, the daemon, its client and
// the project. At the test's end the daemon stops (SIGTERM) and nothing is
// left running in proj.
func serveProject(t *testing.T, state, proj string, env []string, timeout time.Duration, args ...string) (context.Context, *daemon, *client.Client, api.Project) {
	t.Helper()
	if env == nil {
		env = os.Environ()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	d := startDaemonEnv(t, state, env, append([]string{"--project", proj}, args...)...)
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
	return ctx, d, cl, p
}

// startModel starts troupe's fake model server, closed at the test's end.
func startModel(t testing.TB) *fakemodel.Server {
	t.Helper()
	model := fakemodel.New(fakemodel.Options{})
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	return model
}

// listJSON decodes out, the --json of a listing ({"KEY": [...], ...}),
// into v: the list under key.
func listJSON(out, key string, v any) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return err
	}
	raw, ok := m[key]
	if !ok {
		return fmt.Errorf("no %q in %s", key, out)
	}
	return json.Unmarshal(raw, v)
}
