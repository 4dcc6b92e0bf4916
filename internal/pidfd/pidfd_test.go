package pidfd

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWaitSignalReap: Wait ends when its context does, or once the process
// exits (not reaped: the zombie stays until Reap); a signal after the exit
// is not an error.
func TestWaitSignalReap(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := Open(cmd.Process.Pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a running process = %v, want the context's deadline", err)
	}
	if err := p.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after SIGKILL: %v", err)
	}
	if err := unix.Kill(p.PID(), 0); err != nil {
		t.Errorf("kill -0 after Wait: %v, want the zombie still there (Wait does not reap)", err)
	}
	p.Reap()
	if err := unix.Kill(p.PID(), 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("kill -0 after Reap: %v, want ESRCH", err)
	}
	if err := p.Signal(unix.SIGKILL); err != nil {
		t.Errorf("signal after the exit: %v", err)
	}
	if _, err := Open(p.PID()); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Open of a reaped pid = %v, want ESRCH", err)
	}
}
