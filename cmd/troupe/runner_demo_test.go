package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunnerDemo runs examples/runner-demo as its README says: run.sh
// starts a daemon and a runner with folders of their own; the lead's ask
// reaches the coder on the runner, which works in the runner's root; the
// runner shows the coder; the coder's file comes back to the daemon's
// worktree (diff, then merge into the project); Ctrl-C (here SIGTERM)
// stops both.
func TestRunnerDemo(t *testing.T) {
	script, _ := filepath.Abs("../../examples/runner-demo/run.sh")
	cmd := exec.Command("sh", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "TROUPE="+binary, "TMPDIR="+t.TempDir(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	// A demo that never gets ready fails the test instead of hanging it.
	stuck := time.AfterFunc(2*time.Minute, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	var said strings.Builder
	var base, proj, state string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		l := lines.Text()
		said.WriteString(l + "\n")
		if b, ok := strings.CutPrefix(l, "runner demo: "); ok {
			base = b
		}
		if p, ok := strings.CutPrefix(l, "  cd "); ok {
			proj = p
		}
		if _, s, ok := strings.Cut(l, " --state-dir "); ok && state == "" {
			state, _, _ = strings.Cut(s, " ")
		}
		if strings.HasPrefix(l, "Ctrl-C stops") {
			break
		}
	}
	stuck.Stop()
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
		}
		cmd.Wait()
		close(done)
	}()
	if base == "" || proj != filepath.Join(base, "project") || state != filepath.Join(base, "daemon") {
		t.Fatalf("run.sh said:\n%s%s", said.String(), stderr.String())
	}
	logs := func() string {
		d, _ := os.ReadFile(filepath.Join(base, "daemon.log"))
		r, _ := os.ReadFile(filepath.Join(base, "box.log"))
		return "daemon:\n" + string(d) + "runner:\n" + string(r)
	}

	out := mustTroupe(t, state, proj, "ask", "lead", "take notes")
	work := filepath.Join(base, "box", "root")
	if !strings.Contains(out, "The coder says: "+work+"/") || !strings.Contains(out, "wrote notes.txt") {
		t.Fatalf("ask lead:\n%s\n%s", out, logs())
	}
	if out := mustTroupe(t, state, proj, "runners"); !strings.Contains(out, "box ") || !strings.Contains(out, "since ") || !strings.Contains(out, "project/coder (idle)") {
		t.Errorf("runners:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(proj, "notes.txt")); err == nil {
		t.Fatal("the coder's file is in the project folder before a merge")
	}
	if out := mustTroupe(t, state, proj, "diff", "coder"); !strings.Contains(out, "+written by the coder on box") {
		t.Fatalf("diff coder:\n%s\n%s", out, logs())
	}
	mustTroupe(t, state, proj, "merge", "coder")
	if b, err := os.ReadFile(filepath.Join(proj, "notes.txt")); err != nil || string(b) != "written by the coder on box\n" {
		t.Errorf("notes.txt after merge coder: %q, %v", b, err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("run.sh did not stop within 30s of SIGTERM\n%s", logs())
	}
	if left := groupLeft(cmd.Process.Pid); len(left) > 0 {
		t.Errorf("processes left after run.sh stopped: %s", strings.Join(left, "; "))
	}
	if l := logs(); !strings.Contains(l, "daemon stopped") || !strings.Contains(l, "bus connection closed") {
		t.Errorf("the daemon and the runner did not both stop:\n%s", l)
	}
}
