package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// ownerTeam's agents may start background tasks and write notes without
// asking (C15: in the default mode both wait on the person).
const ownerTeam = `
[[agent]]
name = "lead"
engine = "fake"
allowed_tools = ["run_in_background", "memory_write"]

[[agent]]
name = "worker"
engine = "fake"
allowed_tools = ["run_in_background", "memory_write"]
`

// fifo makes a named pipe the test opens to release tasks blocked on it.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestC6_TaskCompletionsSurviveDaemonSIGKILL: tasks run while the daemon is
// SIGKILLed; some end while it is down, one goes on after the restart; one
// is killed with task_kill. After the restart every completion reaches its
// owner exactly once, the kill is reported as such.
func TestC6_TaskCompletionsSurviveDaemonSIGKILL(t *testing.T) {
	state, proj, pipes := t.TempDir(), t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	// Each task blocks reading its fifo until the test writes to it.
	var ids []task.ID
	var started []api.Task
	var gates []string
	for i := range 5 {
		gate := fifo(t, pipes, fmt.Sprint("gate", i))
		owner := []troupe.AgentID{"lead", "worker"}[i%2]
		tk, err := cl.RunTask(ctx, p.ID, api.RunTaskRequest{Command: fmt.Sprintf("read line < %s; echo task-%d says $line", gate, i), Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		if tk, err = cl.TaskDebug(ctx, p.ID, tk.ID); err != nil { // with its supervisor's pid
			t.Fatal(err)
		}
		ids, gates, started = append(ids, tk.ID), append(gates, gate), append(started, tk)
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	// Three tasks end while no daemon runs.
	for i := range 3 {
		release(t, gates[i])
	}
	waitExited(t, started[:3])

	d = startDaemon(t, state)
	cl, _ = client.FromStateDir(state)
	if err := cl.KillTask(ctx, p.ID, ids[4]); err != nil {
		t.Fatal(err)
	}
	release(t, gates[3]) // ends with the new daemon watching
	for _, a := range []troupe.AgentID{"lead", "worker"} {
		waitTaskMessages(t, ctx, cl, p.ID, a, map[troupe.AgentID]int{"lead": 3, "worker": 2}[a])
	}
	ms, _ := allMessages(ctx, cl, p.ID, "")
	seen := map[string]int{}
	for _, m := range ms {
		if m.Kind != troupe.KindTask {
			continue
		}
		if m.State != troupe.MsgDelivered {
			t.Errorf("completion %q ended %s, want delivered", m.Text, m.State)
		}
		for i, id := range ids {
			if strings.Contains(m.Text, string(id)) {
				seen[fmt.Sprint(i)]++
				if want := []troupe.AgentID{"lead", "worker"}[i%2]; m.To != want {
					t.Errorf("completion of task %d went to %s, want its owner %s", i, m.To, want)
				}
				if i < 4 && !strings.Contains(m.Text, fmt.Sprintf("task-%d says go", i)) {
					t.Errorf("completion of task %d lacks its output: %q", i, m.Text)
				}
				if i == 4 && !strings.Contains(m.Text, "killed") {
					t.Errorf("completion of the killed task does not say so: %q", m.Text)
				}
			}
		}
	}
	for i := range ids {
		if seen[fmt.Sprint(i)] != 1 {
			t.Errorf("task %d's completion reached its owner %d times, want exactly once", i, seen[fmt.Sprint(i)])
		}
	}
	tk, _ := cl.Task(ctx, p.ID, ids[4])
	if tk.State != task.Killed {
		t.Errorf("killed task state = %s, want killed", tk.State)
	}
	d.stop(syscall.SIGTERM)
}

func release(t *testing.T, gate string) {
	t.Helper()
	f, err := os.OpenFile(gate, os.O_WRONLY, 0) // blocks until the task reads
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "go")
	f.Close()
}

// waitExited waits, without polling, for the supervisors of tasks to exit
// (each writes its status file just before): a pidfd becomes readable when
// its process ends, for processes that are not our children too.
func waitExited(t *testing.T, tasks []api.Task) {
	t.Helper()
	for _, tk := range tasks {
		if tk.Debug == nil {
			t.Fatalf("task %s without its supervisor's pid: get it with TaskDebug", tk.ID)
		}
		fd, err := unix.PidfdOpen(tk.Debug.SupervisorPID, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // already gone
		}
		if err != nil {
			t.Fatal(err)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 30_000)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n == 0 {
				t.Fatalf("supervisor of task %s did not exit within 30s: %v", tk.ID, err)
			}
			break
		}
		unix.Close(fd)
	}
}

// TestC1_TaskCompletionStaysInItsProject is the seed's QA case, extended:
// project B is a cp -r of A, same agent ids. A's lead starts background
// jobs through MCP while B's lead works too; every completion of A reaches
// A's lead, and nothing of it enters B's inbox or B's sessions.
func TestC1_TaskCompletionStaysInItsProject(t *testing.T) {
	state, a := t.TempDir(), t.TempDir()
	writeTeam(t, a, ownerTeam)
	b := filepath.Join(t.TempDir(), "copy")
	copyDir(t, a, b)
	startDaemon(t, state, "--project", a, "--project", b)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pa, _ := cl.ResolveProject(ctx, a)
	pb, _ := cl.ResolveProject(ctx, b)
	for i := range 4 {
		req, err := cl.Ask(ctx, pa.ID, "lead", fmt.Sprintf("!bg echo from-A-%d\n!say {result}", i), 0)
		if err != nil || !strings.Contains(req.Answer, "started task") {
			t.Fatalf("A's lead could not start a job: %+v %v", req, err)
		}
		if req, err := cl.Ask(ctx, pb.ID, "lead", fmt.Sprintf("busy in B %d", i), 0); err != nil || req.Answer != fmt.Sprintf("echo: busy in B %d", i) {
			t.Fatalf("B's lead: %+v %v", req, err)
		}
	}
	waitTaskMessages(t, ctx, cl, pa.ID, "lead", 4)
	msA, _ := allMessages(ctx, cl, pa.ID, "")
	n := 0
	for _, m := range msA {
		if m.Kind == troupe.KindTask {
			n++
			if m.To != "lead" || m.Project != pa.ID || !strings.Contains(m.Text, "from-A-") {
				t.Errorf("A's completion %+v", m)
			}
		}
	}
	if n != 4 {
		t.Errorf("A's lead got %d completions, want 4", n)
	}
	msB, _ := allMessages(ctx, cl, pb.ID, "")
	for _, m := range msB {
		if m.Kind == troupe.KindTask || strings.Contains(m.Text, "from-A") {
			t.Errorf("B holds a message of A's jobs: %+v", m)
		}
	}
	tasksB, _ := cl.Tasks(ctx, pb.ID)
	if len(tasksB) != 0 {
		t.Errorf("B lists A's tasks: %+v", tasksB)
	}
	// A's task ids are unknown in B.
	tasksA, _ := cl.Tasks(ctx, pa.ID)
	if _, err := cl.Task(ctx, pb.ID, tasksA[0].ID); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("A's task seen through B: %v", err)
	}
}

// TestTaskWith100MBOfOutputDoesNotGrowTheDaemon: a task writes 100 MB; the
// daemon, which tails it for the completion message and for task output,
// stays small.
func TestTaskWith100MBOfOutputDoesNotGrowTheDaemon(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	before := statusField(t, d.cmd.Process.Pid, "VmRSS:")
	tk, err := cl.RunTask(ctx, p.ID, api.RunTaskRequest{Command: "head -c " + cmpOr(os.Getenv("TROUPE_TEST_BYTES"), "100000000") + " /dev/zero | tr '\\\\0' x; echo; echo the-end", Owner: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	waitTaskMessages(t, ctx, cl, p.ID, "lead", 1)
	out, err := cl.TaskOutput(ctx, p.ID, tk.ID, 64<<10)
	if err != nil || !strings.HasSuffix(out, "the-end\n") || len(out) > 64<<10 {
		t.Fatalf("output tail: %d bytes, %v", len(out), err)
	}
	after := statusField(t, d.cmd.Process.Pid, "VmRSS:")
	if after-before > 10<<10 {
		t.Fatalf("daemon RSS grew from %d KB to %d KB over a 100 MB task", before, after)
	}
	t.Logf("daemon RSS %d KB before, %d KB after a 100 MB task", before, after)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestRemovingAProjectKillsItsTasks: nobody would hear of their end.
func TestRemovingAProjectKillsItsTasks(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx := context.Background()
	p, _ := cl.ResolveProject(ctx, proj)
	tk, err := cl.RunTask(ctx, p.ID, api.RunTaskRequest{Command: "sleep 300", Owner: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	if tk, err = cl.TaskDebug(ctx, p.ID, tk.ID); err != nil {
		t.Fatal(err)
	}
	mustTroupe(t, state, proj, "project", "remove")
	waitExited(t, []api.Task{tk})
	// Killed, in one of the two ways internal/task documents: the
	// supervisor caught the SIGTERM and recorded the kill, or the SIGTERM
	// came while its Go runtime was starting, before it caught signals:
	// then only the kill request is there and the job never started.
	dir := filepath.Join(state, "tasks", string(tk.ID))
	raw, err := os.ReadFile(filepath.Join(dir, "status.json"))
	switch {
	case err == nil:
		if !strings.Contains(string(raw), `"killed"`) {
			t.Fatalf("status of the removed project's task: %s; want killed", raw)
		}
	case errors.Is(err, fs.ErrNotExist):
		_, kerr := os.Stat(filepath.Join(dir, "kill"))
		_, oerr := os.Stat(filepath.Join(dir, "output.log"))
		if kerr != nil || !errors.Is(oerr, fs.ErrNotExist) {
			t.Fatalf("the removed project's task left no status; kill request: %v, output: %v; want a kill before the job started", kerr, oerr)
		}
	default:
		t.Fatal(err)
	}
}

// startedID reads the task id from `troupe task run`'s "started task ID".
func startedID(t *testing.T, out string) task.ID {
	t.Helper()
	id, ok := strings.CutPrefix(strings.TrimSpace(out), "started task ")
	if !ok {
		t.Fatalf("task run said %q", out)
	}
	return task.ID(id)
}

func readPidFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestC11_TaskStopsItsEscapedDescendants: a task's grandchildren that
// escape by setsid and by a double fork into their own session are
// stopped when the job exits and on `troupe task kill`, and `troupe task
// show` says what was stopped.
func TestC11_TaskStopsItsEscapedDescendants(t *testing.T) {
	state, proj, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	for i, kill := range []bool{false, true} {
		dir := filepath.Join(tmp, fmt.Sprint(i))
		os.Mkdir(dir, 0o700)
		a, b := filepath.Join(dir, "a.pid"), filepath.Join(dir, "b.pid")
		script := `setsid sh -c 'echo $$ > ` + a + `.tmp; mv ` + a + `.tmp ` + a + `; exec sleep 1000' &
(setsid sh -c 'sleep 1001 & echo $! > ` + b + `.tmp; mv ` + b + `.tmp ` + b + `' &)
while [ ! -e ` + a + ` ] || [ ! -e ` + b + ` ]; do sleep 0.01; done
`
		if kill {
			script += "echo ready > " + fifo(t, dir, "ready") + "; sleep 1000\n"
		}
		id := startedID(t, mustTroupe(t, state, proj, "task", "run", "--owner", "lead", script))
		if kill {
			if _, err := os.ReadFile(filepath.Join(dir, "ready")); err != nil { // the job and its escapees run
				t.Fatal(err)
			}
			mustTroupe(t, state, proj, "task", "kill", string(id))
		}
		waitTaskMessages(t, ctx, cl, p.ID, "lead", i+1)
		pidB := readPidFile(t, b)
		for _, pid := range []int{readPidFile(t, a), pidB} {
			if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
				t.Errorf("escaped process %d outlived its task (kill %v): %v", pid, kill, err)
			}
		}
		// The double-forked sleep is named by its pid: stopped a moment
		// after its fork, it may not have exec'd sleep yet (its command
		// line is still its parent shell's).
		show := mustTroupe(t, state, proj, "task", "show", string(id))
		if !strings.Contains(show, "its supervisor stopped ") || !strings.Contains(show, fmt.Sprintf("(pid %d, setsid)", pidB)) {
			t.Errorf("task show does not say what was stopped (kill %v):\n%s", kill, show)
		}
		tk, err := cl.Task(ctx, p.ID, id)
		if err != nil || tk.Stopped == nil || tk.Stopped.Count < 2 {
			t.Errorf("API task %+v, %v; want stopped with at least 2 processes", tk, err)
		}
		if want := map[bool]task.State{false: task.Exited, true: task.Killed}[kill]; tk.State != want {
			t.Errorf("state %s, want %s", tk.State, want)
		}
	}
}

// TestC14_TaskOutputIsCapped: `task run --max-output 1MB` of 10 MB keeps
// the first and the last 512 KB; the folder stays within the cap and
// `task show` states the cut.
func TestC14_TaskOutputIsCapped(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	startDaemon(t, state, "--project", proj)
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	id := startedID(t, mustTroupe(t, state, proj, "task", "run", "--owner", "lead", "--max-output", "1MB", "seq 1 1500000"))
	waitTaskMessages(t, ctx, cl, p.ID, "lead", 1)
	var size int64
	ents, _ := os.ReadDir(filepath.Join(state, "tasks", string(id)))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
	}
	if size > 1<<20+8<<10 {
		t.Errorf("the task folder holds %d bytes, over its 1 MB cap", size)
	}
	show := mustTroupe(t, state, proj, "task", "show", string(id))
	if !strings.Contains(show, "output cut: the task wrote ") || !strings.Contains(show, "1 MB kept: the first 512 KB and the last 512 KB") || !strings.HasSuffix(show, "\n1500000\n") {
		t.Errorf("task show:\n%s", show[:min(len(show), 600)])
	}
	tk, err := cl.Task(ctx, p.ID, id)
	if err != nil || tk.Output == nil || tk.Output.Cut <= 0 || tk.Output.Head != 512<<10 {
		t.Errorf("API task output %+v, %v", tk.Output, err)
	}
	if _, errs, code := runCLI(t, state, proj, "task", "run", "--max-output", "12XB", "true"); code == 0 || !strings.Contains(errs, "--max-output") {
		t.Errorf("a bad --max-output: exit %d, %s", code, errs)
	}
}

// TestC14_FullDiskFailsTheTask: the tasks' folder is a 1 MB tmpfs. A task
// that fills it ends failed with "no space left", frees its slot (the
// limit is 1), stays failed across a daemon SIGKILL and restart; a start
// on the full disk fails saying so.
func TestC14_FullDiskFailsTheTask(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	tasks := filepath.Join(state, "tasks")
	if err := os.Mkdir(tasks, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", tasks, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=0700"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (this test needs root): %v", err)
		}
		t.Skipf("cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(tasks, unix.MNT_DETACH) })
	filler := filepath.Join(tasks, "filler")
	if err := os.WriteFile(filler, make([]byte, 400<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj, "--max-tasks-per-project", "1")
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, _ := cl.ResolveProject(ctx, proj)
	id := startedID(t, mustTroupe(t, state, proj, "task", "run", "--owner", "lead", "head -c 4000000 /dev/zero"))
	waitTaskMessages(t, ctx, cl, p.ID, "lead", 1)
	check := func(when string) {
		tk, err := cl.Task(ctx, p.ID, id)
		if err != nil || tk.State != task.Failed || !strings.Contains(tk.Reason, "no space left on device while writing output.log") {
			t.Fatalf("%s: task %s %q, %v; want failed, no space left", when, tk.State, tk.Reason, err)
		}
	}
	check("after it ended")
	// The slot is free, the disk is not.
	_, errs, code := runCLI(t, state, proj, "task", "run", "echo hi")
	if code == 0 || !strings.Contains(errs, "no space left") || strings.Contains(errs, "limit") {
		t.Errorf("task run on a full disk: exit %d, %q; want no space left", code, errs)
	}
	if ents, _ := os.ReadDir(tasks); len(ents) != 2 { // filler and the failed task's folder
		t.Errorf("the failed start left a folder: %d entries", len(ents))
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	startDaemon(t, state)
	cl, _ = client.FromStateDir(state)
	check("after a restart")
	os.Remove(filler)
	id = startedID(t, mustTroupe(t, state, proj, "task", "run", "--owner", "lead", "echo room"))
	waitTaskMessages(t, ctx, cl, p.ID, "lead", 2)
	if tk, _ := cl.Task(ctx, p.ID, id); tk.State != task.Exited {
		t.Errorf("a task once space was freed: %s %q", tk.State, tk.Reason)
	}
}
