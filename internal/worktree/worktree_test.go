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

func run(t testing.TB, dir string, args ...string) string {
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
	if err != nil || !strings.Contains(d.Diff, "+new") {
		t.Fatalf("Diff = %q, %v", d.Diff, err)
	}
	if st := run(t, wt, "status", "--porcelain"); st != "?? new.txt" {
		t.Fatalf("Diff touched the agent's index: %q", st)
	}
	os.WriteFile(filepath.Join(repo, "README"), []byte("edited\n"), 0o644)
	head := run(t, repo, "rev-parse", "HEAD")
	_, err = m.Merge(ctx, k, spec, repo, MergeOptions{})
	if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "README") {
		t.Fatalf("Merge into a dirty tree: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "README")); string(b) != "edited\n" || run(t, repo, "rev-parse", "HEAD") != head {
		t.Fatal("a refused merge changed the project")
	}
	run(t, repo, "checkout", "--", "README")
	res, err := m.Merge(ctx, k, spec, repo, MergeOptions{})
	if err != nil || !res.Merged || !res.Committed || res.Into != "main" {
		t.Fatalf("Merge = %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(repo, "new.txt")); err != nil {
		t.Fatal(err)
	}
	if res, err := m.Merge(ctx, k, spec, repo, MergeOptions{}); err != nil || res.Merged {
		t.Fatalf("second Merge = %+v, %v; want nothing to merge", res, err)
	}
	if _, err := m.Diff(ctx, troupe.RuntimeKey{Project: "p1", Agent: "b"}, troupe.AgentSpec{Name: "b", Workspace: Worktree}, repo, false); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("Diff of an agent without a worktree: %v", err)
	}
}

// TestSwappedWorktreeIsNotTouched: a worktree folder replaced by a link
// to the project, or whose .git file was pointed at the project's own
// repository, is refused by Reset and Merge (reset --hard and clean -fd,
// add and commit would otherwise act on the person's checkout); the
// project's files, untracked ones included, and its branch stay.
func TestSwappedWorktreeIsNotTouched(t *testing.T) {
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
	os.WriteFile(filepath.Join(repo, "README"), []byte("person's edit\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "untracked.txt"), []byte("keep me\n"), 0o644)
	run(t, repo, "commit", "-q", "-am", "person's commit")
	os.WriteFile(filepath.Join(repo, "README"), []byte("person's uncommitted edit\n"), 0o644)
	head := run(t, repo, "rev-parse", "HEAD")
	check := func(how string) {
		t.Helper()
		if err := m.Reset(ctx, k, spec, repo); !errors.Is(err, troupe.ErrConflict) {
			t.Errorf("%s: Reset = %v, want a conflict", how, err)
		}
		if _, err := m.Merge(ctx, k, spec, repo, MergeOptions{}); !errors.Is(err, troupe.ErrConflict) {
			t.Errorf("%s: Merge = %v, want a conflict", how, err)
		}
		if b, _ := os.ReadFile(filepath.Join(repo, "untracked.txt")); string(b) != "keep me\n" {
			t.Errorf("%s: the project's untracked file is gone", how)
		}
		if b, _ := os.ReadFile(filepath.Join(repo, "README")); string(b) != "person's uncommitted edit\n" {
			t.Errorf("%s: the project's edit is gone: %q", how, b)
		}
		if got := run(t, repo, "rev-parse", "refs/heads/main"); got != head {
			t.Errorf("%s: main moved from %s to %s", how, head, got)
		}
	}
	// The .git file pointed at the project's repository.
	gitFile := filepath.Join(wt, ".git")
	saved, _ := os.ReadFile(gitFile)
	os.WriteFile(gitFile, []byte("gitdir: "+filepath.Join(repo, ".git")+"\n"), 0o644)
	check(".git file swapped")
	os.WriteFile(gitFile, saved, 0o644)
	// The folder replaced by a link to the project.
	os.Rename(wt, wt+".moved")
	os.Symlink(repo, wt)
	check("folder linked")
	os.Remove(wt)
	os.Rename(wt+".moved", wt)
	if err := m.Reset(ctx, k, spec, repo); err != nil {
		t.Errorf("Reset of the real worktree: %v", err)
	}
}

// TestHugeDiffIsCut: the diff of a huge file the agent made is kept up to
// MaxGitOutput, the cut stated, not read whole into the daemon.
func TestHugeDiffIsCut(t *testing.T) {
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
	line := strings.Repeat("log line of an agent that wrote too much\n", 1000)
	f, _ := os.Create(filepath.Join(wt, "huge.log"))
	for f.Write([]byte(line)); ; f.Write([]byte(line)) {
		if fi, _ := f.Stat(); fi.Size() > MaxGitOutput+(4<<20) {
			break
		}
	}
	f.Close()
	d, err := m.Diff(ctx, k, spec, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Diff) > MaxGitOutput+200 || !d.Cut || !strings.Contains(d.Diff, "+log line") || !strings.Contains(d.Diff[len(d.Diff)-200:], "bytes more of git's output not shown") {
		t.Errorf("diff of %d bytes (cut %v), ending %q", len(d.Diff), d.Cut, d.Diff[max(0, len(d.Diff)-200):])
	}
}
