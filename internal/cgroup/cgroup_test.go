package cgroup

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// allocEnv makes the test binary a program that allocates and touches
// that many MiB, then exits 0.
const allocEnv = "TROUPE_CGROUP_TEST_ALLOC_MIB"

// joinEnv makes the test binary join the cgroup (JSON Group) then exec
// its arguments: what the sandbox's helper does.
const joinEnv = "TROUPE_CGROUP_TEST_JOIN"

func TestMain(m *testing.M) {
	if v := os.Getenv(joinEnv); v != "" {
		var g Group
		if err := json.Unmarshal([]byte(v), &g); err != nil {
			panic(err)
		}
		if err := g.Join(); err != nil {
			panic(err)
		}
		os.Unsetenv(joinEnv)
		args := os.Args[1:]
		panic(syscall.Exec(args[0], args, os.Environ()))
	}
	if v := os.Getenv(allocEnv); v != "" {
		n, _ := strconv.Atoi(v)
		var keep [][]byte
		for range n {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		os.Exit(len(keep) - n) // 0
	}
	os.Exit(m.Run())
}

// start starts cmd in g as troupe does: born in it (v2), or through the
// joining shell (v1).
func start(t *testing.T, g Group, cmd *exec.Cmd) {
	t.Helper()
	if g.NeedsJoin() {
		cmd.Args = g.JoinArgv(cmd.Args)
		cmd.Path = cmd.Args[0]
	}
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
}

// open is a Manager on this machine; the test is skipped where it gives
// no caps (the CI machine and the developers' do).
func open(t *testing.T) *Manager {
	t.Helper()
	m := Open(Options{StateDir: t.TempDir()})
	if r := m.Report(); !r.Memory || !r.Processes {
		t.Skipf("this machine gives no memory and process caps: %s", r.Text())
	}
	t.Cleanup(func() {
		m.Close()
	})
	return m
}

func TestMemoryCapKillsWithOOM(t *testing.T) {
	m := open(t)
	g, err := m.Group(troupe.RuntimeKey{Project: "p1", Agent: "lead"}, Limits{Memory: 64 << 20, Processes: 64})
	if err != nil {
		t.Fatal(err)
	}
	run := func(mib int) error {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), allocEnv+"="+strconv.Itoa(mib))
		start(t, g, cmd)
		return cmd.Wait()
	}
	if err := run(8); err != nil {
		t.Fatalf("8 MiB under a 64 MiB cap: %v", err)
	}
	before := g.OOMKills()
	err = run(256)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("256 MiB under a 64 MiB cap ended with %v, want SIGKILL", err)
	}
	if got := g.OOMKills(); got <= before {
		t.Fatalf("OOM kills %d, want more than %d", got, before)
	}
}

func TestProcessCapStopsForks(t *testing.T) {
	m := open(t)
	g, err := m.Group(troupe.RuntimeKey{Project: "p1", Agent: "lead"}, Limits{Processes: 20})
	if err != nil {
		t.Fatal(err)
	}
	// A loop that forks sleepers, counting them in a file, until a fork
	// fails (sh then gives up).
	count := filepath.Join(t.TempDir(), "count")
	cmd := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt 200 ]; do sleep 3 & i=$((i+1)); echo $i > "$0"; done`, count)
	start(t, g, cmd)
	err = cmd.Wait()
	for _, pid := range procs(g.Pids + g.Dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	// The sleepers' parent is gone: their reaper (init) frees the cgroup
	// a moment later.
	for i := 0; i < 100 && len(procs(g.Pids+g.Dir)) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(count)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil {
		t.Errorf("the loop ended well after %d forks", n)
	}
	if n >= 20 || n < 10 {
		t.Fatalf("the loop started %d processes under a cap of 20, want fewer than 20 (and some)", n)
	}
}

func TestGroupsAreProjectQualified(t *testing.T) {
	m := open(t)
	a, err := m.Group(troupe.RuntimeKey{Project: "p1", Agent: "lead"}, Limits{Processes: 50})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Group(troupe.RuntimeKey{Project: "p2", Agent: "lead"}, Limits{Processes: 60})
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two projects' agents named lead share the cgroup %+v", a)
	}
	for g, want := range map[Group]string{a: "50", b: "60"} {
		dir := cmpOr(g.Dir, g.Pids)
		got, _ := os.ReadFile(filepath.Join(dir, "pids.max"))
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("%s: pids.max %q, want %s", dir, got, want)
		}
	}
	// Removed: its folders go.
	m.Remove(troupe.RuntimeKey{Project: "p1", Agent: "lead"})
	if _, err := os.Stat(cmpOr(a.Dir, a.Pids)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup of a removed agent: %v", err)
	}
	if _, err := os.Stat(cmpOr(b.Dir, b.Pids)); err != nil {
		t.Errorf("the other project's cgroup: %v", err)
	}
}

func TestTwoDaemonsTwoNames(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if Name(a) == Name(b) {
		t.Fatal("two state dirs, one cgroup name")
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "1.5G": 3 << 29, "2GB": 2e9, "1000": 1000, " 64 M ": 64 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, _ := ParseSize(FormatSize(got)); back != got {
			t.Errorf("FormatSize(%d) = %q reads back as %d", got, FormatSize(got), back)
		}
	}
	for _, bad := range []string{"", "4 gigs", "-1G", "0", "G", "1e3"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) took it", bad)
		}
	}
}

func TestProbeReadsTheLayout(t *testing.T) {
	root := t.TempDir()
	mk := func(p, data string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(data), 0o644)
	}
	// Pure v2, memory and pids delegated to the daemon's service.
	mk("proc/self/cgroup", "0::/user.slice/troupe.service\n")
	mk("proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
	mk("sys/fs/cgroup/user.slice/troupe.service/cgroup.controllers", "cpu memory pids\n")
	f := probe(root)
	if !f.v2ok || f.v2own != filepath.Join(root, "sys/fs/cgroup/user.slice/troupe.service") {
		t.Fatalf("v2 delegated: %+v", f)
	}
	// Not delegated: named.
	mk("sys/fs/cgroup/user.slice/troupe.service/cgroup.controllers", "cpu\n")
	if f := probe(root); f.v2ok || !strings.Contains(f.v2why, "not delegated") {
		t.Fatalf("v2 without memory: %+v", f)
	}
	// Hybrid: v1 memory below a sub-cgroup, pids at its root.
	mk("proc/self/cgroup", "8:pids:/\n4:memory:/api/x\n0::/\n")
	mk("proc/self/mountinfo", "1 0 0:1 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"+
		"2 0 0:2 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n3 0 0:3 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	mk("sys/fs/cgroup/unified/cgroup.controllers", "\n")
	f = probe(root)
	if f.v2ok || f.v1mem != filepath.Join(root, "sys/fs/cgroup/memory/api/x") || f.v1pids != filepath.Join(root, "sys/fs/cgroup/pids") {
		t.Fatalf("hybrid: %+v", f)
	}
}

// TestJoin: a process that joins (the Landlock helper's way) runs what
// it execs in the agent's cgroups, as does one the shell joins.
func TestJoin(t *testing.T) {
	m := open(t)
	g, err := m.Group(troupe.RuntimeKey{Project: "p1", Agent: "lead"}, Limits{Memory: 1 << 30, Processes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !g.NeedsJoin() {
		t.Skip("cgroup v2: children are born in their cgroup")
	}
	b, _ := json.Marshal(g)
	helper := exec.Command(os.Args[0], "/bin/cat", "/proc/self/cgroup")
	helper.Env = append(os.Environ(), joinEnv+"="+string(b))
	shell := exec.Command("cat", "/proc/self/cgroup")
	shell.Args = g.JoinArgv(shell.Args)
	shell.Path = shell.Args[0]
	for name, cmd := range map[string]*exec.Cmd{"helper": helper, "shell": shell} {
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, c := range []string{":memory:", ":pids:"} {
			i := strings.Index(string(out), c)
			if i < 0 || !strings.HasPrefix(string(out[i+len(c):]), "/") || !strings.Contains(strings.SplitN(string(out[i:]), "\n", 2)[0], "/project-p1/agent-lead") {
				t.Errorf("%s: the program runs in %q, not in lead's %s cgroup", name, out, c)
			}
		}
	}
	// A file it cannot write stops it before the program runs.
	bad := exec.Command("/bin/echo", "RAN")
	bad.Args = (&Group{Pids: t.TempDir() + "/nowhere"}).JoinArgv(bad.Args)
	bad.Path = bad.Args[0]
	if out, err := bad.Output(); err == nil || strings.Contains(string(out), "RAN") {
		t.Errorf("a join that failed ran the program: %q, %v", out, err)
	}
}

// TestOpenV2 runs the cgroup v2 set-up on a made-up tree (this machine's
// v2 has no controllers): the daemon moves into a leaf of its own, memory
// and pids are enabled below its cgroup and below the agents' parents, an
// agent's caps are written; a cgroup shared with another process is not
// taken over, and says why.
func TestOpenV2(t *testing.T) {
	root := t.TempDir()
	own := filepath.Join(root, "sys/fs/cgroup/user.slice/troupe.service")
	mk := func(p, data string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(root, "proc/self/cgroup"), "0::/user.slice/troupe.service\n")
	mk(filepath.Join(root, "proc/self/mountinfo"), "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	mk(filepath.Join(own, "cgroup.controllers"), "cpu memory pids\n")
	mk(filepath.Join(own, "cgroup.procs"), strconv.Itoa(os.Getpid())+"\n")
	mk(filepath.Join(own, "cgroup.subtree_control"), "")
	// In a real cgroupfs these files exist in every new folder.
	state := t.TempDir()
	name := Name(state)
	for _, d := range []string{name + "-daemon", name, filepath.Join(name, "project-p"), filepath.Join(name, "project-p", "agent-lead")} {
		mk(filepath.Join(own, d, "cgroup.procs"), "")
		mk(filepath.Join(own, d, "cgroup.subtree_control"), "")
	}
	m := Open(Options{StateDir: state, Root: root})
	if r := m.Report(); r.Version != "v2" || !r.Memory || !r.Processes {
		t.Fatalf("report %+v, want v2 caps", m.Report())
	}
	read := func(p string) string {
		b, _ := os.ReadFile(filepath.Join(own, p))
		return strings.TrimSpace(string(b))
	}
	if got := read(name + "-daemon/cgroup.procs"); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("the daemon's leaf holds %q, want this process", got)
	}
	for _, d := range []string{".", name} {
		if got := read(d + "/cgroup.subtree_control"); got != "+memory +pids" {
			t.Errorf("%s/cgroup.subtree_control = %q", d, got)
		}
	}
	g, err := m.Group(troupe.RuntimeKey{Project: "p", Agent: "lead"}, Limits{Memory: 4 << 30, Processes: 512})
	if err != nil {
		t.Fatal(err)
	}
	if g.Dir != filepath.Join(own, name, "project-p", "agent-lead") || g.NeedsJoin() {
		t.Errorf("group %+v", g)
	}
	if read(filepath.Join(name, "project-p", "agent-lead", "memory.max")) != "4294967296" || read(filepath.Join(name, "project-p", "agent-lead", "pids.max")) != "512" ||
		read(filepath.Join(name, "project-p", "cgroup.subtree_control")) != "+memory +pids" {
		t.Errorf("caps not written in %s", g.Dir)
	}

	// At the stop, the controllers below the daemon's cgroup are turned
	// back off (a real cgroupfs refuses while a cgroup below uses them).
	m.Close()
	if got := read("cgroup.subtree_control"); got != "-memory -pids" {
		t.Errorf("at the stop, cgroup.subtree_control = %q", got)
	}

	// Another process in the daemon's cgroup (a terminal's shell): left
	// alone, caps off, said why.
	mk(filepath.Join(own, "cgroup.subtree_control"), "")
	mk(filepath.Join(own, "cgroup.procs"), "1\n"+strconv.Itoa(os.Getpid())+"\n")
	m = Open(Options{StateDir: t.TempDir(), Root: root})
	if r := m.Report(); r.Memory || r.Processes || !strings.Contains(r.Why, "holds other processes") || !strings.Contains(r.Why, "Delegate=yes") {
		t.Errorf("shared cgroup: report %+v, want caps off and why", r)
	}
}
