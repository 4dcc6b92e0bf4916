package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMain(m *testing.M) {
	task.MaybeRunSupervisor()
	os.Exit(m.Run())
}

var dev = troupe.RuntimeKey{Project: "p1", Agent: "dev"}

// teams is a fixed approved team: its checks and one agent, dev, working in
// the project folder dir unless it names a runner.
type teams struct {
	dir    string
	checks map[troupe.CheckName]troupe.Check
	runner troupe.RunnerName
}

func (t *teams) Check(p troupe.ProjectID, name troupe.CheckName) (troupe.Check, string, bool) {
	c, ok := t.checks[name]
	return c, t.dir, ok && p == dev.Project
}

func (t *teams) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	return troupe.AgentSpec{Name: dev.Agent, Engine: "fake", Runner: t.runner}, t.dir, k == dev
}

type harness struct {
	teams   *teams
	store   *MemStore
	journal *journal.MemStore
	tasks   *task.Manager
	inbox   *inbox.MemStore
	rows    *task.MemStore
	c       *Checker
	pub     chan Result
}

func newHarness(t *testing.T, checks ...troupe.Check) *harness {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{teams: &teams{dir: dir, checks: map[troupe.CheckName]troupe.Check{}}, store: NewMemStore(),
		journal: journal.NewMemStore(), inbox: inbox.NewMemStore(), rows: task.NewMemStore(), pub: make(chan Result, 16)}
	for _, c := range checks {
		h.teams.checks[c.Name] = c
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	h.tasks = task.New(task.Options{Store: h.rows, Inbox: h.inbox, Dir: filepath.Join(t.TempDir(), "tasks"),
		Supervisor: task.TestSupervisorCommand(), KillGrace: time.Second, Logger: log})
	h.c = New(Options{Teams: h.teams, Tasks: h.tasks, Store: h.store, Journal: h.journal, Logger: log,
		Publish: func(r Result) { h.pub <- r }})
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func (h *harness) run(t *testing.T, name troupe.CheckName) Result {
	t.Helper()
	r, err := h.c.Run(context.Background(), dev, name)
	if err != nil {
		t.Fatalf("Run(%s): %v", name, err)
	}
	return r
}

// noMessages: a check's end goes to troupe, never to the agent's inbox,
// and leaves no task row.
func (h *harness) noMessages(t *testing.T) {
	t.Helper()
	if ms, _ := h.inbox.Pending(context.Background(), dev, 0); len(ms) != 0 {
		t.Errorf("the agent's inbox holds %+v; a check's end is troupe's", ms)
	}
	if ts, _ := h.rows.Tasks(context.Background(), dev.Project); len(ts) != 0 {
		t.Errorf("task rows %+v; a check is no agent's task", ts)
	}
}

func TestRunRecordsVerdictOnTheLatestTurn(t *testing.T) {
	h := newHarness(t,
		troupe.Check{Name: "ok", Command: "echo fine", Timeout: time.Minute},
		troupe.Check{Name: "bad", Command: "echo broken >&2; exit 3", Timeout: time.Minute},
		troupe.Check{Name: "sub", Command: "pwd", Timeout: time.Minute, Dir: "pkg/a"})
	if err := os.MkdirAll(filepath.Join(h.teams.dir, "pkg/a"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, turn := range []troupe.TurnID{"t1", "t2"} {
		h.journal.Record(ctx, journal.Entry{Key: dev, Turn: turn, Start: &journal.Start{At: time.Now()}})
	}
	ok := h.run(t, "ok")
	if ok.State != troupe.CheckPassed || ok.ExitCode != 0 || ok.Output != "fine\n" || ok.Turn != "t2" || ok.Command != "echo fine" {
		t.Fatalf("ok = %+v; want passed on turn t2 with its output", ok)
	}
	bad := h.run(t, "bad")
	if bad.State != troupe.CheckFailed || bad.ExitCode != 3 || bad.Output != "broken\n" {
		t.Fatalf("bad = %+v; want failed, exit 3", bad)
	}
	sub := h.run(t, "sub")
	if sub.State != troupe.CheckPassed || sub.Output != filepath.Join(h.teams.dir, "pkg/a")+"\n" {
		t.Fatalf("sub = %+v; want run in pkg/a", sub)
	}
	for _, want := range []Result{ok, bad, sub} {
		if got := <-h.pub; got != want {
			t.Errorf("published %+v; want %+v", got, want)
		}
	}
	rs, err := h.c.Results(ctx, Filter{Project: dev.Project, Agent: dev.Agent, Turn: "t2"})
	if err != nil || len(rs) != 3 || rs[0] != sub || rs[2] != ok {
		t.Fatalf("Results = %+v, %v", rs, err)
	}
	h.noMessages(t)
}

func TestRunRefuses(t *testing.T) {
	h := newHarness(t, troupe.Check{Name: "ok", Command: "true", Timeout: time.Minute})
	if _, err := h.c.Run(context.Background(), dev, "nope"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("unknown check: %v; want ErrNotFound", err)
	}
	if _, err := h.c.Run(context.Background(), troupe.RuntimeKey{Project: "p1", Agent: "ghost"}, "ok"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("unknown agent: %v; want ErrNotFound", err)
	}
	h.teams.runner = "gpu-box"
	if _, err := h.c.Run(context.Background(), dev, "ok"); err == nil || !strings.Contains(err.Error(), "runner gpu-box") || !strings.Contains(err.Error(), "not run yet") {
		t.Errorf("agent on a runner: %v; want its checks not run, naming the runner", err)
	}
	if rs, _ := h.store.CheckResults(context.Background(), Filter{Project: "p1"}); len(rs) != 0 {
		t.Errorf("refused runs recorded: %+v", rs)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// readPIDs reads the pids a command wrote, one a line.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, n)
	}
	if len(pids) == 0 {
		t.Fatal("the command wrote no pid")
	}
	return pids
}

// TestHostileNeverEnds: a check that never ends is stopped by its timeout,
// its whole process group with it.
func TestHostileNeverEnds(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	h := newHarness(t, troupe.Check{Name: "hang", Command: "sleep 600 & echo $! > " + pids + "; echo $$ >> " + pids + "; sleep 600", Timeout: 500 * time.Millisecond})
	r := h.run(t, "hang")
	if r.State != troupe.CheckTimedOut || r.ExitCode != -1 || !strings.Contains(r.Reason, "timeout") {
		t.Fatalf("hang = %+v; want timed_out", r)
	}
	for _, pid := range readPIDs(t, pids) {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("pid %d of the check outlived its timeout", pid)
		}
	}
	h.noMessages(t)
}

// TestHostileGigabytes: a check that prints far more than is kept costs
// the cap on disk, and its result keeps the tail, the cut said.
func TestHostileGigabytes(t *testing.T) {
	const total = 1 << 30
	h := newHarness(t, troupe.Check{Name: "loud", Command: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo; echo the end", total), Timeout: 5 * time.Minute})
	r := h.run(t, "loud")
	if r.State != troupe.CheckPassed || r.OutputBytes != int64(total+len("\nthe end\n")) {
		t.Fatalf("loud: state %s, %d bytes written; want passed, %d", r.State, r.OutputBytes, total+9)
	}
	if len(r.Output) > MaxOutput || !strings.HasSuffix(r.Output, "xx\nthe end\n") || !strings.Contains(r.OutputCut, "the last") {
		t.Fatalf("loud kept %d bytes ending %q, cut %q; want at most %d, the tail, the cut said", len(r.Output), r.Output[max(0, len(r.Output)-20):], r.OutputCut, MaxOutput)
	}
}

// TestHostileForksAway: what a check leaves running when it ends (a
// process in a session of its own) is stopped, and said.
func TestHostileForksAway(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	h := newHarness(t, troupe.Check{Name: "fork", Command: "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > " + pids + "; exit 0", Timeout: time.Minute})
	r := h.run(t, "fork")
	if r.State != troupe.CheckPassed {
		t.Fatalf("fork = %+v; want passed", r)
	}
	for _, pid := range readPIDs(t, pids) {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("pid %d the check forked away outlived it", pid)
		}
	}
	if !strings.Contains(r.Reason, "stopped") && !strings.Contains(r.Reason, "leftover") {
		t.Errorf("reason %q; want what was stopped said", r.Reason)
	}
}

// TestHostileDirLinksOut: a check's dir that is a symbolic link out of the
// workspace is refused, and the command does not run.
func TestHostileDirLinksOut(t *testing.T) {
	outside := t.TempDir()
	h := newHarness(t, troupe.Check{Name: "escape", Command: "touch ran", Timeout: time.Minute, Dir: "link"})
	if err := os.Symlink(outside, filepath.Join(h.teams.dir, "link")); err != nil {
		t.Fatal(err)
	}
	r := h.run(t, "escape")
	if r.State != troupe.CheckError || !strings.Contains(r.Reason, "outside") {
		t.Fatalf("escape = %+v; want error, the dir refused", r)
	}
	if _, err := os.Stat(filepath.Join(outside, "ran")); err == nil {
		t.Fatal("the check ran outside the workspace")
	}
}
