package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeGit puts a git on PATH that prints version and fails otherwise.
func fakeGit(t *testing.T, version string) {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\nfor a; do last=$a; done\nif [ \"$last\" = version ]; then echo 'git version " + version + "'; exit 0; fi\necho 'fake git' >&2; exit 2\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
}

// TestCheckGitTooOld: a git older than 2.38 is refused naming both
// versions, by CheckGit and by CheckRepo (before anything else).
func TestCheckGitTooOld(t *testing.T) {
	fakeGit(t, "2.30.1")
	for _, err := range []error{CheckGit(context.Background()), CheckRepo(context.Background(), t.TempDir(), "")} {
		if err == nil || !strings.Contains(err.Error(), "git 2.30.1 is too old") || !strings.Contains(err.Error(), "2.38 or newer") {
			t.Fatalf("err = %v; want one naming 2.30.1 and 2.38", err)
		}
	}
}

func TestCheckGitNewEnough(t *testing.T) {
	fakeGit(t, "2.38.0 (Apple Git-1)")
	if err := CheckGit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"2.38": true, "2.38.0": true, "2.37.9": false, "2.4.1": false, "3.0": true, "2.100.1": true, "1.9": false} {
		if got := atLeast(v, MinGit); got != want {
			t.Errorf("atLeast(%s) = %v", v, got)
		}
	}
}

// TestListAndRemoveProject: List shows each worktree's branch, dirtiness
// and commits ahead, and an orphan; RemoveProject removes the clean one,
// keeps the dirty one saying why, keeps both branches and leaves the
// person's tree alone.
func TestListAndRemoveProject(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o644)
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "start")
	os.WriteFile(filepath.Join(repo, "mine.txt"), []byte("the person's own work\n"), 0o644)
	m := New(t.TempDir())
	ctx := context.Background()
	a := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	b := troupe.AgentSpec{Name: "b", Workspace: Worktree}
	c := troupe.AgentSpec{Name: "c", Workspace: Worktree}
	ka, kb := troupe.RuntimeKey{Project: "p1", Agent: "a"}, troupe.RuntimeKey{Project: "p1", Agent: "b"}
	wa, err := m.Dir(ctx, ka, a, repo)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := m.Dir(ctx, kb, b, repo)
	if err != nil {
		t.Fatal(err)
	}
	// a commits once; b leaves a file uncommitted.
	os.WriteFile(filepath.Join(wa, "x.txt"), []byte("x\n"), 0o644)
	run(t, wa, "add", "x.txt")
	run(t, wa, "commit", "-q", "-m", "x")
	os.WriteFile(filepath.Join(wb, "draft.txt"), []byte("draft\n"), 0o644)

	// The team now holds a (made) and c (not yet made); b left it.
	res, err := m.List(ctx, "p1", repo, []troupe.AgentSpec{a, c, {Name: "lead"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Worktrees) != 3 {
		t.Fatalf("list = %+v", res)
	}
	ia, ib, ic := res.Worktrees[0], res.Worktrees[1], res.Worktrees[2]
	if ia.Agent != "a" || !ia.Exists || ia.Dirty || ia.Ahead != 1 || ia.Orphan || ia.Branch != "troupe/a" || ia.Path != wa || ia.Base != "HEAD" || ia.Error != "" {
		t.Errorf("a = %+v", ia)
	}
	if ib.Agent != "b" || !ib.Exists || !ib.Dirty || ib.Changed != 1 || ib.Ahead != 0 || !ib.Orphan || ib.Error != "" {
		t.Errorf("b = %+v", ib)
	}
	if ic.Agent != "c" || ic.Exists || ic.Orphan || ic.Error != "" {
		t.Errorf("c = %+v", ic)
	}
	if p, ok := m.Kept(kb); !ok || p != wb {
		t.Errorf("Kept(b) = %s %v", p, ok)
	}
	// A name from a URL that is not an agent's has no worktree, even when
	// it leads to one.
	os.MkdirAll(filepath.Join(filepath.Dir(filepath.Dir(wb)), "x", ".git"), 0o700)
	for _, bad := range []troupe.AgentID{"../x", "..", "B", ""} {
		if p, ok := m.Kept(troupe.RuntimeKey{Project: "p1", Agent: bad}); ok {
			t.Errorf("Kept(%q) = %s", bad, p)
		}
	}

	rm, err := m.RemoveProject(ctx, "p1", repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Worktrees) != 2 || !rm.Worktrees[0].Removed || rm.Worktrees[1].Removed ||
		!strings.Contains(rm.Worktrees[1].Reason, "draft.txt") || !strings.Contains(rm.Worktrees[1].Reason, "uncommitted") {
		t.Fatalf("removals = %+v", rm)
	}
	if _, err := os.Stat(wa); !os.IsNotExist(err) {
		t.Errorf("clean worktree still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(wb, "draft.txt")); err != nil || string(b) != "draft\n" {
		t.Errorf("dirty worktree's work: %q %v", b, err)
	}
	run(t, repo, "rev-parse", "--verify", "troupe/a")
	run(t, repo, "rev-parse", "--verify", "troupe/b")
	if b, err := os.ReadFile(filepath.Join(repo, "mine.txt")); err != nil || string(b) != "the person's own work\n" {
		t.Errorf("the person's file: %q %v", b, err)
	}
	if st := run(t, repo, "status", "--porcelain"); st != "?? mine.txt" {
		t.Errorf("the person's tree: %q", st)
	}
}
