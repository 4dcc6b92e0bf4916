package task

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/tool"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// escapeScript starts two processes that leave the job: one with setsid,
// one by a double fork into a session of its own; each writes its pid to
// a file in dir once it runs, and the script waits for both files.
func escapeScript(dir string) string {
	a, b := filepath.Join(dir, "a.pid"), filepath.Join(dir, "b.pid")
	return `setsid sh -c 'echo $$ > ` + a + `.tmp; mv ` + a + `.tmp ` + a + `; exec sleep 1000' &
(setsid sh -c 'sleep 1001 & echo $! > ` + b + `.tmp; mv ` + b + `.tmp ` + b + `' &)
while [ ! -e ` + a + ` ] || [ ! -e ` + b + ` ]; do sleep 0.01; done
echo spawned
`
}

func readPid(tb testing.TB, path string) int {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}

// C11: processes that escape the job's group and session (setsid, double
// fork) are stopped with it, whether it exits by itself or is killed, and
// the task says what was stopped.
func TestC11_EscapedDescendantsAreStopped(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "exit", true: "kill"}[kill], func(t *testing.T) {
			h := newHarness(t, nil)
			m, stop := h.run(t)
			defer stop()
			pids := t.TempDir()
			script := escapeScript(pids)
			var ready string
			if kill {
				ready = fifo(t, "ready")
				script += "echo ready > " + ready + "; sleep 1000\n"
			}
			tk := h.start(t, m, script, 0)
			if kill {
				awaitReady(t, ready)
				must(t, m.Kill(t.Context(), tk.Project, tk.ID))
			}
			msg := h.next(t)
			a, b := readPid(t, filepath.Join(pids, "a.pid")), readPid(t, filepath.Join(pids, "b.pid"))
			for _, pid := range []int{a, b} {
				if !gone(pid) {
					t.Errorf("escaped process %d still runs after the task ended", pid)
				}
			}
			got, err := m.Task(t.Context(), tk.Project, tk.ID)
			must(t, err)
			if want := map[bool]State{false: Exited, true: Killed}[kill]; got.State != want {
				t.Errorf("state %s, want %s", got.State, want)
			}
			if got.Stopped == nil || got.Stopped.Count < 2 || got.Stopped.Signal != "SIGTERM" {
				t.Fatalf("Stopped = %+v; want the 2 escaped processes, stopped with SIGTERM", got.Stopped)
			}
			found := map[int]string{}
			for _, p := range got.Stopped.Procs {
				found[p.PID] = p.Escaped
			}
			for _, pid := range []int{a, b} {
				if e, ok := found[pid]; !ok || e != "setsid" {
					t.Errorf("process %d: listed %v, escaped %q; want listed as setsid: %+v", pid, ok, e, got.Stopped.Procs)
				}
			}
			if !strings.Contains(msg.Text, "Its supervisor stopped ") || !strings.Contains(msg.Text, "sleep 1001 (pid "+strconv.Itoa(b)+", setsid)") {
				t.Errorf("the completion does not say what was stopped: %q", msg.Text)
			}
			stop()
			h.noLeftovers(t, tk, a, b)
		})
	}
}

// C14: an output past its cap keeps its head and its tail, the middle cut;
// the files never hold more than the cap (plus the tail's header), and
// every reader states the cut.
func TestC14_OutputPastItsCapKeepsHeadAndTail(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	defer stop()
	const limit = 1 << 20
	tk, err := m.Start(t.Context(), p1dev, h.proj, Job{Command: "seq 1 1500000", MaxOutput: limit})
	must(t, err)
	msg := h.next(t)
	dir := filepath.Join(h.dir, string(tk.ID))
	if size, _ := dirSize(dir); size > limit+8<<10 {
		t.Errorf("the task folder holds %d bytes, over the cap of %d (+8 KB)", size, limit)
	}
	head, err := os.ReadFile(filepath.Join(dir, outputFile))
	must(t, err)
	if len(head) != limit/2 || !strings.HasPrefix(string(head), "1\n2\n3\n") {
		t.Errorf("output.log: %d bytes starting %q; want the first %d bytes", len(head), head[:min(len(head), 12)], limit/2)
	}
	got, err := m.Task(t.Context(), tk.Project, tk.ID)
	must(t, err)
	if o := got.Output; o == nil || o.Head != limit/2 || o.Tail != limit/2 || o.Total < 10<<20 || o.Cut != o.Total-limit {
		t.Fatalf("Output = %+v", got.Output)
	}
	stmt := "the task wrote " + humanBytes(got.Output.Total) + " of output, 1 MB kept: the first 512 KB and the last 512 KB"
	if !strings.Contains(msg.Text, stmt) || !strings.HasSuffix(msg.Text, "\n1500000") {
		t.Errorf("the completion does not state the cut (%q) or lacks the last line: %q", stmt, msg.Text)
	}
	// The end is the end.
	out, err := m.Output(t.Context(), tk.Project, tk.ID, 4096)
	must(t, err)
	if !strings.HasSuffix(out, "\n1499999\n1500000\n") || strings.Contains(out, "cut here") {
		t.Errorf("Output(4 KB) ends %q", out[max(0, len(out)-40):])
	}
	// A read spanning the cut marks it; the middle is gone.
	out, err = m.Output(t.Context(), tk.Project, tk.ID, MaxOutput)
	must(t, err)
	if !strings.Contains(out, "of output cut here: "+stmt) || strings.Contains(out, "\n750000\n") {
		t.Errorf("Output(1 MB) does not mark the cut, or holds the middle: %d bytes", len(out))
	}
	if !strings.HasSuffix(out, "\n1500000\n") || len(out) > MaxOutput {
		t.Errorf("Output(1 MB): %d bytes ending %q", len(out), out[max(0, len(out)-20):])
	}
	// The tool says it first.
	res, err := m.outputTool(t.Context(), tool.Caller{Key: p1dev, Dir: h.proj}, []byte(`{"task_id":"`+string(tk.ID)+`","max_bytes":100}`))
	must(t, err)
	if !strings.HasPrefix(res, "["+stmt) {
		t.Errorf("task_output does not state the cut: %q", res)
	}
	// Bad caps are refused.
	for _, bad := range []int64{1, MinMaxOutput - 1, MaxMaxOutput + 1, -5} {
		if _, err := m.Start(t.Context(), p1dev, h.proj, Job{Command: "true", MaxOutput: bad}); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("MaxOutput %d: %v, want ErrInvalid", bad, err)
		}
	}
}

// C14: a project keeps its task folders within Options.FolderBytes and
// Options.Folders, the oldest ended ones removed first.
func TestC14_TaskFoldersAreCappedPerProject(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.FolderBytes = 200 << 10; o.Folders = 3 })
	m, stop := h.run(t)
	defer stop()
	var ids []ID
	for range 4 {
		tk := h.start(t, m, "head -c 80000 /dev/zero", 0)
		h.next(t)
		ids = append(ids, tk.ID)
	}
	other := h.startFor(t, m, p2dev, h.proj, "true", 0) // another project's: not counted
	h.next(t)
	for i, id := range ids {
		_, err := os.Stat(filepath.Join(h.dir, string(id)))
		if kept := err == nil; kept != (i >= 2) {
			t.Errorf("task %d of 4: folder kept %v; want only the 2 newest (200 KB at most)", i+1, kept)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, string(other.ID))); err != nil {
		t.Errorf("another project's folder: %v", err)
	}
	if _, err := m.Output(t.Context(), "p1", ids[0], 10); err == nil || !strings.Contains(err.Error(), "no longer kept") {
		t.Errorf("output of a pruned task: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"64MB": 64 << 20, "512k": 512 << 10, "1048576": 1 << 20, "1.5 GiB": 3 << 29, "2g": 2 << 30, "10B": 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "-1MB", "12XB", "1e30GB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) should fail", in)
		}
	}
	if got := humanBytes(1288490189); got != "1.2 GB" {
		t.Errorf("humanBytes = %q", got)
	}
}

// mountTmpfs mounts a tmpfs of size (e.g. "1m") on a new temporary folder
// and unmounts it at cleanup. Without the right to mount, it skips, unless
// CI=true: the CI machine runs tests as root, so the test must run there.
func mountTmpfs(tb testing.TB, size string) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("mount a %s tmpfs (the full-disk tests need it; run them as root): %v", size, err)
		}
		tb.Skipf("cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): %v", err)
	}
	tb.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file of n bytes in dir (to leave little room).
func fill(tb testing.TB, dir string, n int) string {
	tb.Helper()
	p := filepath.Join(dir, "filler")
	if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// C14 and C6: a task that fills the disk ends as failed "no space left on
// device while writing output.log" (its status still written, from the
// reserve), frees its slot, and a Manager that was down when it ended
// records it so too, never as lost. A start on the full disk fails saying
// so and leaves nothing behind.
func TestC14_FullDiskFailsTheTaskAndItsStart(t *testing.T) {
	mnt := mountTmpfs(t, "1m")
	h := newHarness(t, func(o *Options) { o.Dir = filepath.Join(mnt, "tasks"); o.MaxPerProject = 1 })
	h.dir = h.opts.Dir
	filler := fill(t, mnt, 400<<10)

	// While the Manager runs.
	m, stop := h.run(t)
	tk := h.start(t, m, "head -c 4000000 /dev/zero; echo not-reached", 0)
	msg := h.next(t)
	got := h.task(t, "p1", tk.ID)
	if got.State != Failed || !strings.Contains(got.Reason, "no space left on device while writing output.log") {
		t.Fatalf("task on a full disk: %s %q; want failed, no space left", got.State, got.Reason)
	}
	if !strings.Contains(msg.Text, "no space left on device") {
		t.Errorf("the completion does not say the disk was full: %q", msg.Text)
	}
	if exists(filepath.Join(h.dir, string(tk.ID), reserveFile)) {
		t.Error("the status reserve is still there after the status was written")
	}
	// Its slot is free (the limit is 1), but the disk is still full: the
	// start fails for that, and leaves no folder behind.
	_, err := m.Start(t.Context(), p1dev, h.proj, Job{Command: "echo hi"})
	var lim *LimitError
	if errors.As(err, &lim) || !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Start on a full disk: %v; want ErrNoSpace, not the limit", err)
	}
	if ents, _ := os.ReadDir(h.dir); len(ents) != 1 {
		t.Errorf("the failed start left a folder: %d folders, want 1", len(ents))
	}

	// While the Manager is down: the next one records it as failed too.
	must(t, os.Remove(filepath.Join(h.dir, string(tk.ID), outputFile)))
	gate := fifo(t, "gate")
	tk2 := h.start(t, m, `read x < "`+gate+`"; head -c 4000000 /dev/zero`, 0)
	stop()
	release(t, gate)
	waitExit(t, tk2.SupervisorPID)
	m, stop = h.run(t)
	defer stop()
	h.next(t)
	got = h.task(t, "p1", tk2.ID)
	if got.State != Failed || !strings.Contains(got.Reason, "no space left on device") {
		t.Fatalf("task that filled the disk while the daemon was down: %s %q; want failed, no space left, not lost", got.State, got.Reason)
	}

	// Room again: tasks start and run.
	must(t, os.Remove(filler))
	must(t, os.Remove(filepath.Join(h.dir, string(tk2.ID), outputFile)))
	h.start(t, m, "echo room", 0)
	if msg := h.next(t); !strings.Contains(msg.Text, "exited 0") {
		t.Errorf("a task after space was freed: %q", msg.Text)
	}
}

// On a disk with no room left, the status is still written: the reserve
// the Manager made for it is given up for it.
func TestStatusIsWrittenFromItsReserveOnAFullDisk(t *testing.T) {
	mnt := mountTmpfs(t, "256k")
	must(t, atomicfile.Write(filepath.Join(mnt, reserveFile), make([]byte, reserveSize), 0o600))
	f, err := os.Create(filepath.Join(mnt, "filler"))
	must(t, err)
	for err == nil {
		_, err = f.Write(make([]byte, 4096))
	}
	f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("filling the disk: %v", err)
	}
	if err := atomicfile.Write(filepath.Join(mnt, "probe"), []byte("x"), 0o600); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("the disk is not full: %v", err)
	}
	st := status{State: Failed, ExitCode: -1, Reason: noSpaceReason(outputFile)}
	must(t, writeStatus(mnt, st))
	got, err := readStatus(mnt)
	if err != nil || got.Reason != st.Reason {
		t.Fatalf("status: %+v, %v", got, err)
	}
	if exists(filepath.Join(mnt, reserveFile)) {
		t.Error("the reserve is still there")
	}
}
