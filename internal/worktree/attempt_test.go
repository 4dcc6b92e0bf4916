package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestStartRefusesWorkAndMovesACleanBranchToTheBase: Start makes a
// missing worktree at the base; it refuses uncommitted changes and
// unmerged commits, naming the reset; a clean branch behind the project's
// HEAD is brought to it. StatFrom counts committed, uncommitted and new
// files against the base.
func TestStartRefusesWorkAndMovesACleanBranchToTheBase(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\ntwo\n"), 0o644)
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "start")
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	first := run(t, repo, "rev-parse", "HEAD")
	if err := m.Start(ctx, k, spec, repo, first); err != nil {
		t.Fatalf("Start on a new worktree: %v", err)
	}
	wt := m.Path(k)
	if got := run(t, wt, "rev-parse", "HEAD"); got != first {
		t.Fatalf("worktree at %s, want %s", got, first)
	}
	// The project moves on; the clean branch follows.
	os.WriteFile(filepath.Join(repo, "b.txt"), []byte("b\n"), 0o644)
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "second")
	second := run(t, repo, "rev-parse", "HEAD")
	if err := m.Start(ctx, k, spec, repo, second); err != nil {
		t.Fatalf("Start of a clean branch behind HEAD: %v", err)
	}
	if got := run(t, wt, "rev-parse", "HEAD"); got != second {
		t.Fatalf("worktree at %s, want %s", got, second)
	}
	if s, err := m.StatFrom(ctx, k, spec, second); err != nil || s != (Stat{}) {
		t.Fatalf("StatFrom of no change = %+v, %v", s, err)
	}

	// Uncommitted work is refused, and counted.
	os.WriteFile(filepath.Join(wt, "a.txt"), []byte("one\nTWO\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(wt, "new.txt"), []byte("n\n"), 0o644)
	err := m.Start(ctx, k, spec, repo, second)
	if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "troupe worktree reset a") {
		t.Fatalf("Start over uncommitted work: %v", err)
	}
	if s, err := m.StatFrom(ctx, k, spec, second); err != nil || s != (Stat{Files: 2, Added: 3, Deleted: 1}) {
		t.Fatalf("StatFrom = %+v, %v; want 2 files +3 -1", s, err)
	}
	// Committed, the same work is still refused (not in the project's
	// HEAD) and counted the same.
	run(t, wt, "add", "-A")
	run(t, wt, "commit", "-q", "-m", "work")
	err = m.Start(ctx, k, spec, repo, second)
	if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "1 commit(s) not merged") {
		t.Fatalf("Start over a commit: %v", err)
	}
	if s, err := m.StatFrom(ctx, k, spec, second); err != nil || s != (Stat{Files: 2, Added: 3, Deleted: 1}) {
		t.Fatalf("StatFrom of committed work = %+v, %v", s, err)
	}
	if err := m.Start(ctx, k, troupe.AgentSpec{Name: "a"}, repo, second); !errors.Is(err, troupe.ErrInvalid) {
		t.Fatalf("Start of a project-folder agent: %v", err)
	}
}
