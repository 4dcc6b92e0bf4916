package task

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/sandbox"
)

// A job in its owner's sandbox cannot read a hidden file or write outside
// its workspace; its supervisor still records its end in the task folder.
func TestSandboxedJob(t *testing.T) {
	if r := sandbox.Detect(); r.Mechanism != sandbox.Bubblewrap {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap is needed (apt-get install bubblewrap): %s", r.Why)
		}
		t.Skipf("no bubblewrap: %s", r.Why)
	}
	h := newHarness(t, nil)
	m, stop := h.run(t)
	defer stop()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	p := &sandbox.Policy{On: true, Network: true, Writable: []string{h.proj}, Hidden: []string{filepath.Dir(secret)}}
	cmd := "cat " + secret + "; echo x > " + outside + "/planted; echo made > made.txt; echo done"
	tk, err := m.Start(context.Background(), p1dev, h.proj, Job{Command: cmd, Sandbox: p})
	if err != nil {
		t.Fatal(err)
	}
	msg := h.next(t)
	if strings.Contains(msg.Text, "SECRET") || !strings.Contains(msg.Text, "done") {
		t.Errorf("completion %q: want the job's end, without the hidden file's text", msg.Text)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("the sandboxed job wrote outside its workspace")
	}
	if b, err := os.ReadFile(filepath.Join(h.proj, "made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("the job's write in its workspace: %q, %v", b, err)
	}
	if got := h.task(t, "p1", tk.ID); got.State != Exited {
		t.Errorf("task %+v: want exited (its supervisor wrote its status)", got)
	}
}
