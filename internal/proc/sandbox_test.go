package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/procstat"
	"github.com/troupe-dev/troupe/internal/sandbox"
)

// sandboxFor is a sandbox whose only writable folder is dir, on
// bubblewrap (the test fails under CI=true when it is missing).
func sandboxFor(t *testing.T, dir string) *sandbox.Policy {
	t.Helper()
	if r := sandbox.Detect(); r.Mechanism != sandbox.Bubblewrap {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap is needed (apt-get install bubblewrap): %s", r.Why)
		}
		t.Skipf("no bubblewrap: %s", r.Why)
	}
	return &sandbox.Policy{On: true, Network: true, Writable: []string{dir}, Hidden: []string{filepath.Join(dir, "hidden")}}
}

func TestSandboxedChildGetsTheGroupsSignals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The program's own SIGTERM handler runs to its end: bubblewrap, the
	// group's leader, is not killed first (its death SIGKILLs the program).
	script := `trap 'sleep 0.2; echo graceful > ` + dir + `/gr; exit 0' TERM; echo ready; while :; do sleep 0.05; done`
	p := startSh(t, script, Spec{StopTimeout: 2 * time.Second, Sandbox: sandboxFor(t, dir)}) // the handler takes 0.2 s
	if line := readLine(t, bufio.NewReader(p.Stdout())); line != "ready" {
		t.Fatalf("child said %q", line)
	}
	stop(t, p, context.Background())
	if b, err := os.ReadFile(filepath.Join(dir, "gr")); err != nil || strings.TrimSpace(string(b)) != "graceful" {
		t.Fatalf("the program's SIGTERM handler did not finish: %q, %v (exit %v)", b, err, p.ProcessState())
	}
	if p.ProcessState().ExitCode() != 0 {
		t.Errorf("exit %v, want the program's own 0", p.ProcessState())
	}
}

func TestSandboxedChildIsConfinedAndKilledWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hidden"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	// It ignores SIGTERM: SIGKILL to the group ends it, bubblewrap and all.
	p := startSh(t, "trap '' TERM; cat "+dir+"/hidden; echo; echo ready; exec sleep 1000", Spec{StopTimeout: 50 * time.Millisecond, Sandbox: sandboxFor(t, dir)})
	out := bufio.NewReader(p.Stdout())
	first := readLine(t, out)
	if first == "SECRET" {
		t.Fatal("the sandboxed child read a hidden file")
	}
	if line := readLine(t, out); line != "ready" {
		t.Fatalf("child said %q", line)
	}
	stop(t, p, context.Background())
	if n := strings.Count(p.StderrTail(), "SECRET"); n != 0 {
		t.Errorf("hidden text on stderr")
	}
	// Nothing of its group is left running. (A zombie of the program, whose
	// parent bubblewrap is gone, waits for init to reap it: on a machine
	// whose init reaps late it is still listed, dead.)
	if live := liveInGroup(t, p.PID()); len(live) > 0 {
		t.Errorf("still running in the sandboxed child's group: %v", live)
	}
}

// liveInGroup lists the processes of process group pgid that are not
// zombies ("pid state comm" each), from /proc. A member SIGKILLed a moment
// ago may still be exiting (state R or D, freeing its memory): each member
// found is given up to 5 s in all, waited on its pidfd, before the list is
// taken again.
func liveInGroup(t *testing.T, pgid int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, m := range listLiveInGroup(t, pgid) {
		var pid int
		fmt.Sscan(m, &pid)
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(int(time.Until(deadline).Milliseconds()), 0))
			unix.Close(fd)
		}
	}
	return listLiveInGroup(t, pgid)
}

// listLiveInGroup is liveInGroup's one look at /proc.
func listLiveInGroup(t *testing.T, pgid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil || st.PGRP != pgid || st.Zombie() {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		live = append(live, e.Name()+" "+string(st.State)+" "+strings.TrimSpace(string(comm)))
	}
	return live
}

func TestSandboxCannotBeEnforced(t *testing.T) {
	_, err := Start(Spec{Argv: []string{"/bin/true"}, Sandbox: &sandbox.Policy{On: true, Mechanism: "none"}})
	if err == nil || !strings.Contains(err.Error(), "sandbox") {
		t.Fatalf("start with an unenforceable sandbox: %v, want an error naming it", err)
	}
}
