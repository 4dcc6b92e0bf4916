package daemon

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRemoteAddrNeedsAllowRemote: an address beyond loopback is refused
// unless --allow-remote says so, and an unspecified one then also needs
// the public name that Host and Origin are checked against.
func TestRemoteAddrNeedsAllowRemote(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		addr   string
		allow  bool
		public string
		want   string // a part of the error; "" for none
	}{
		{"127.0.0.1:7433", false, "", ""},
		{"[::1]:7433", false, "", ""},
		{"localhost:7433", false, "", ""},
		{"0.0.0.0:7433", false, "", "listening on 0.0.0.0 exposes your agents beyond this machine: pass --allow-remote and --public-name HOST if you mean it"},
		{"[::]:7433", false, "", "listening on :: exposes your agents"},
		{":7433", false, "", "listening on every interface exposes your agents"},
		{"192.0.2.7:7433", false, "", "pass --allow-remote"},
		{"0.0.0.0:7433", true, "", "needs --public-name HOST"},
		{"0.0.0.0:7433", true, "box.example", ""},
		{"192.0.2.7:7433", true, "", ""},
		{"127.0.0.1:7433", false, "box.example", "needs --allow-remote"},
		{"0.0.0.0:7433", true, "http://box.example:80", "bare host name"},
		{"7433", false, "", "give HOST:PORT"},
	} {
		err := CheckAddr(ctx, c.addr, c.allow, c.public)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s allow=%v public=%q: %v, want no error", c.addr, c.allow, c.public, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s allow=%v public=%q: %v, want an error with %q", c.addr, c.allow, c.public, err, c.want)
		}
	}
	// Run refuses before it takes the state dir.
	dir := t.TempDir()
	err := Run(ctx, Config{Addr: "0.0.0.0:0", StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
		t.Fatalf("Run on 0.0.0.0 without --allow-remote: %v", err)
	}
}

// TestEnvironmentHidden: the running daemon is not dumpable, so its
// /proc/<pid>/environ (model keys) is closed to the agents' commands of
// the same user. Where the test runs as a user without CAP_SYS_PTRACE, a
// child reading it is refused too.
func TestEnvironmentHidden(t *testing.T) {
	t.Setenv("TROUPE_TEST_SECRET", "sk-hidden-0123")
	t.Setenv("HOME", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Addr: "127.0.0.1:0", StateDir: t.TempDir(), Out: readyWriter(ready)})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon was not ready in 30s")
	}
	defer func() {
		cancel()
		<-done
	}()
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Fatalf("dumpable = %d (%v), want 0", d, err)
	}
	if os.Geteuid() != 0 {
		out, err := exec.Command("cat", "/proc/"+strconv.Itoa(os.Getpid())+"/environ").CombinedOutput()
		if err == nil || strings.Contains(string(out), "sk-hidden-0123") {
			t.Errorf("a child read the daemon's environment: %v %q", err, out)
		}
	}
}

// readyWriter closes ready at the first write (the daemon's "ready" line).
type readyWriter chan struct{}

func (r readyWriter) Write(b []byte) (int, error) {
	select {
	case <-r:
	default:
		close(r)
	}
	return len(b), nil
}
