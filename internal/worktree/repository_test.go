package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestInRepository: a folder in a git repository (its top, or below)
// has checkpoints; one outside any has none (ErrNoCheckpoints).
func TestInRepository(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := InRepository(ctx, dir); !errors.Is(err, ErrNoCheckpoints) {
		t.Fatalf("a folder outside any repository = %v, want ErrNoCheckpoints", err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	sub := filepath.Join(dir, "sub")
	os.MkdirAll(sub, 0o755)
	for _, d := range []string{dir, sub} {
		if err := InRepository(ctx, d); err != nil {
			t.Fatalf("%s in a repository = %v", d, err)
		}
	}
}
