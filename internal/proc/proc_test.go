package proc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// patience bounds every wait: reaching it is a failure (a hang), not a
// pace the tests rely on.
const patience = 30 * time.Second

// startSh starts sh -c script and stops it at the end of the test.
func startSh(t *testing.T, script string, spec Spec) *Process {
	t.Helper()
	spec.Argv = []string{"/bin/sh", "-c", script}
	p, err := Start(spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // kill at once: the test is over
		p.Stop(ctx)
	})
	return p
}

// readLine reads one line of the child's stdout.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := r.ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(patience):
		t.Fatalf("no line from the child after %v", patience)
		return ""
	}
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(patience):
		t.Fatalf("child not reaped after %v", patience)
	}
}

// stop runs p.Stop(ctx) and fails if it does not return within patience.
func stop(t *testing.T, p *Process, ctx context.Context) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { p.Stop(ctx); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(patience):
		t.Fatalf("Stop did not return after %v", patience)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the child was reaped")
	}
}

func TestStopEscalates(t *testing.T) {
	t.Parallel()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		script string // prints "ready" once its signal dispositions are set
		stop   time.Duration
		ctx    context.Context
		signal syscall.Signal // 0: a clean exit
	}{
		{"exits at end of input", "echo ready; cat >/dev/null", time.Hour, context.Background(), 0},
		{"ignores end of input: SIGTERM", "echo ready; exec sleep 1000", 50 * time.Millisecond, context.Background(), syscall.SIGTERM},
		{"ignores SIGTERM too: SIGKILL", "trap '' TERM; echo ready; exec sleep 1000", 50 * time.Millisecond, context.Background(), syscall.SIGKILL},
		{"context done: no waits", "trap '' TERM; echo ready; exec sleep 1000", time.Hour, done, syscall.SIGKILL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startSh(t, tc.script, Spec{StopTimeout: tc.stop})
			if line := readLine(t, bufio.NewReader(p.Stdout())); line != "ready" {
				t.Fatalf("child said %q", line)
			}
			stop(t, p, tc.ctx)
			ws := p.ProcessState().Sys().(syscall.WaitStatus)
			switch {
			case tc.signal == 0 && (ws.Signaled() || ws.ExitStatus() != 0 || p.ExitErr() != nil):
				t.Errorf("child ended with %v (%v), want a clean exit", p.ProcessState(), p.ExitErr())
			case tc.signal != 0 && (!ws.Signaled() || ws.Signal() != tc.signal):
				t.Errorf("child ended with %v, want signal %v", p.ProcessState(), tc.signal)
			}
			if err := syscall.Kill(-p.PID(), 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("kill -0 on the child's group: %v, want ESRCH", err)
			}
			stop(t, p, context.Background()) // again: returns at once
		})
	}
}

func TestStopKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	// The grandchild ignores SIGTERM (an ignored signal is inherited) and
	// holds the stdout pipe: end of file on it proves it died.
	tests := []struct {
		name   string
		script string
		signal syscall.Signal // that ended the child
	}{
		{"child and grandchild ignore SIGTERM", "trap '' TERM; sleep 1000 & echo ready; wait", syscall.SIGKILL},
		{"child dies at SIGTERM, its grandchild does not", "(trap '' TERM; exec sleep 1000) & echo ready; wait", syscall.SIGTERM},
		// No Stop at all: a leader that exits by itself takes its group along.
		{"child exits on its own, leaving a grandchild", "sleep 1000 & echo ready; exit 0", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startSh(t, tc.script, Spec{StopTimeout: 50 * time.Millisecond})
			out := bufio.NewReader(p.Stdout())
			if line := readLine(t, out); line != "ready" {
				t.Fatalf("child said %q", line)
			}
			if tc.signal != 0 {
				stop(t, p, context.Background())
			} else {
				<-p.Done()
			}
			if ws := p.ProcessState().Sys().(syscall.WaitStatus); ws.Signaled() && ws.Signal() != tc.signal || !ws.Signaled() && tc.signal != 0 {
				t.Errorf("child ended with %v, want %v", p.ProcessState(), tc.signal)
			}
			eof := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, out)
				eof <- err
			}()
			select {
			case err := <-eof:
				if err != nil {
					t.Errorf("read stdout: %v", err)
				}
			case <-time.After(patience):
				t.Fatal("stdout still open: the grandchild outlived Stop")
			}
			p.Stdout().Close()
		})
	}
}

func TestOwnProcessGroup(t *testing.T) {
	t.Parallel()
	p := startSh(t, "cat", Spec{})
	if pgid, err := syscall.Getpgid(p.PID()); err != nil || pgid != p.PID() {
		t.Errorf("pgid = %d, %v; want the child's own group %d", pgid, err, p.PID())
	}
	if pgid, _ := syscall.Getpgid(0); pgid == p.PID() {
		t.Error("the test is in the child's group")
	}
	stop(t, p, context.Background())
}

func TestStderrTailIsBoundedAndEveryChunkReported(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // guards reported
	reported := 0
	p := startSh(t, `head -c 20000 /dev/zero | tr '\0' x >&2; printf '\nwarning: one\nthe last line  \n\n' >&2`, Spec{
		StderrTail: 1024,
		OnStderr: func(b []byte) {
			mu.Lock()
			reported += len(b)
			mu.Unlock()
		},
	})
	waitDone(t, p) // the tail is complete once Done is closed
	tail := p.StderrTail()
	if len(tail) != 1024 || !strings.HasSuffix(tail, "x\nwarning: one\nthe last line  \n\n") {
		t.Errorf("tail of %d bytes ends %q; want 1024 bytes, the last ones", len(tail), tail[max(0, len(tail)-40):])
	}
	if got := p.LastStderrLine(); got != "the last line" {
		t.Errorf("last line %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := 20000 + len("\nwarning: one\nthe last line  \n\n"); reported != want {
		t.Errorf("OnStderr saw %d bytes, want %d", reported, want)
	}
}

func TestExitStatusAndSignalAfterExit(t *testing.T) {
	t.Parallel()
	p := startSh(t, "exit 3", Spec{})
	waitDone(t, p)
	var ee interface{ ExitCode() int }
	if err := p.ExitErr(); !errors.As(err, &ee) || ee.ExitCode() != 3 || err.Error() != "exit status 3" {
		t.Errorf("ExitErr = %v, want exit status 3", err)
	}
	// Reaped: the pid may be another process's by now; Signal does nothing.
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("signal after exit: %v", err)
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	p := startSh(t, "while read -r line; do echo \"got $line\"; done", Spec{})
	out := bufio.NewReader(p.Stdout())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := io.WriteString(p.Stdin(), "one whole line\n"); err != nil {
				t.Errorf("write: %v", err)
			}
		})
	}
	wg.Wait()
	for range 8 {
		if line := readLine(t, out); line != "got one whole line" {
			t.Errorf("child read %q: writes were interleaved", line)
		}
	}
	if err := p.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := io.WriteString(p.Stdin(), "late\n"); !errors.Is(err, ErrStdinClosed) {
		t.Errorf("write after close: %v, want ErrStdinClosed", err)
	}
	waitDone(t, p) // the loop ends at end of input
	if err := p.ExitErr(); err != nil {
		t.Errorf("exit: %v", err)
	}
}

func TestStartFails(t *testing.T) {
	t.Parallel()
	if _, err := Start(Spec{}); err == nil || err.Error() != "start process: no command" {
		t.Errorf("no argv: %v", err)
	}
	if _, err := Start(Spec{Argv: []string{"/nonexistent/agent"}}); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("missing program: %v", err)
	}
	if _, err := Start(Spec{Argv: []string{"/bin/sh"}, Dir: "/nonexistent/dir"}); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("missing dir: %v", err)
	}
}

// childEnv runs env(1) with the given environment and returns its lines.
func childEnv(t *testing.T, env []string) []string {
	t.Helper()
	p, err := Start(Spec{Argv: []string{"/usr/bin/env"}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(p.Stdout())
	p.Stdout().Close()
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	return strings.Fields(string(out))
}

// Not parallel: it sets the test's environment.
func TestEnv(t *testing.T) {
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
	t.Setenv("TROUPE_TEST_KEEP", "daemon")
	t.Setenv("TROUPE_TEST_OVERRIDDEN", "daemon")
	t.Setenv("TROUPE_TEST_LEAK", "leaked")
	os.Unsetenv("TROUPE_TEST_MISSING")
	allow := []string{"TROUPE_TEST_KEEP", "TROUPE_TEST_OVERRIDDEN", "TROUPE_TEST_MISSING", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"}
	agent := map[string]string{"TROUPE_TEST_OVERRIDDEN": "agent", "AGENT_VAR": "a=b", "CLAUDE_CODE_SSE_PORT": "9", "EXTRA": "agent"}
	env := Env(allow, agent, "EXTRA=extra", "CLAUDECODE=1", "CLAUDE_CODE_USE_BEDROCK=1", "no equals sign")
	// The person's own Claude settings pass; the nested-session markers never do.
	want := []string{"AGENT_VAR=a=b", "CLAUDE_CODE_USE_BEDROCK=1", "EXTRA=extra", "TROUPE_TEST_KEEP=daemon", "TROUPE_TEST_OVERRIDDEN=agent"}
	if !slices.Equal(env, want) {
		t.Errorf("Env:\n got %q\nwant %q", env, want)
	}
	if got := childEnv(t, env); !slices.Equal(got, want) {
		t.Errorf("the child's environment:\n got %q\nwant %q", got, want)
	}
	if got := childEnv(t, nil); len(got) != 0 {
		t.Errorf("a nil Env gave the child %q: nothing is inherited", got)
	}
}

// threads is the number of OS threads of this process.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("Threads: %q", v)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestChildrenDoNotCostAThreadEach: N running children do not hold N OS
// threads (a blocking wait per child would): their reapers and stderr
// readers are parked in Go's poller. Not parallel: other tests' children
// would make threads too.
func TestChildrenDoNotCostAThreadEach(t *testing.T) {
	const n = 50
	before := threads(t)
	for range n {
		startSh(t, "exec sleep 1000", Spec{}) // killed at the end of the test
	}
	// Give the reapers time to block, if they block.
	time.Sleep(300 * time.Millisecond)
	if grown := threads(t) - before; grown >= n/5 {
		t.Errorf("%d children took %d more threads (%d → %d), want far fewer than one each", n, grown, before, before+grown)
	}
}
