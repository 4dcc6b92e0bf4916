package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=p", "GIT_AUTHOR_EMAIL=p@p", "GIT_COMMITTER_NAME=p", "GIT_COMMITTER_EMAIL=p@p")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestDiffAndMergeKeepTheDirtyTree: Diff shows a new file without touching
// the agent's index; Merge refuses a project with uncommitted changes and
// leaves it as it was.
func TestDiffAndMergeKeepTheDirtyTree(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o644)
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "start")
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := m.Dir(ctx, k, spec, repo); err != nil || again != wt {
		t.Fatalf("second Dir = %s, %v; want %s reused", again, err, wt)
	}
	os.WriteFile(filepath.Join(wt, "new.txt"), []byte("new\n"), 0o644)
	d, err := m.Diff(ctx, k, spec, repo, false)
	if err != nil || !strings.Contains(d, "+new") {
		t.Fatalf("Diff = %q, %v", d, err)
	}
	if st := run(t, wt, "status", "--porcelain"); st != "?? new.txt" {
		t.Fatalf("Diff touched the agent's index: %q", st)
	}
	os.WriteFile(filepath.Join(repo, "README"), []byte("edited\n"), 0o644)
	head := run(t, repo, "rev-parse", "HEAD")
	_, err = m.Merge(ctx, k, spec, repo)
	if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "README") {
		t.Fatalf("Merge into a dirty tree: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "README")); string(b) != "edited\n" || run(t, repo, "rev-parse", "HEAD") != head {
		t.Fatal("a refused merge changed the project")
	}
	run(t, repo, "checkout", "--", "README")
	res, err := m.Merge(ctx, k, spec, repo)
	if err != nil || !res.Merged || !res.Committed || res.Into != "main" {
		t.Fatalf("Merge = %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(repo, "new.txt")); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Merge(ctx, k, spec, repo); err != nil || res.Merged {
		t.Fatalf("second Merge = %+v, %v; want nothing to merge", res, err)
	}
	if _, err := m.Diff(ctx, troupe.RuntimeKey{Project: "p1", Agent: "b"}, troupe.AgentSpec{Name: "b", Workspace: Worktree}, repo, false); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("Diff of an agent without a worktree: %v", err)
	}
}
