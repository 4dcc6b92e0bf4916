package worktree

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestGitWritableFromTheRepositorySide: what a worktree agent's git may
// write is found from the repository, not from the worktree's .git file
// the agent can rewrite; a packed branch's missing ref folders are made.
func TestGitWritableFromTheRepositorySide(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o644)
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "start")
	m := New(t.TempDir())
	ctx := context.Background()
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	var wts []string
	for _, a := range []troupe.AgentID{"a", "b"} {
		spec.Name = a
		wt, err := m.Dir(ctx, troupe.RuntimeKey{Project: "p1", Agent: a}, spec, repo)
		if err != nil {
			t.Fatal(err)
		}
		wts = append(wts, wt)
	}
	run(t, repo, "pack-refs", "--all")
	common, _ := filepath.EvalSymlinks(filepath.Join(repo, ".git"))
	refs := filepath.Join(common, "refs", "heads", "troupe")
	if _, err := os.Stat(refs); err == nil {
		t.Fatal("pack-refs left the branches' folder: the test proves nothing")
	}
	// Agent a points its .git file at b's worktree folder.
	os.WriteFile(filepath.Join(wts[0], ".git"), []byte("gitdir: "+filepath.Join(common, "worktrees", "b")+"\n"), 0o644)
	got, err := GitWritable(ctx, repo, wts[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(common, "objects"), filepath.Join(common, "worktrees", "a"), refs, filepath.Join(common, "logs", "refs", "heads", "troupe")}
	if !slices.Equal(got, want) {
		t.Fatalf("GitWritable = %v, want %v", got, want)
	}
	if _, err := os.Stat(refs); err != nil {
		t.Fatalf("the branches' folder was not made: %v", err)
	}
	if _, err := GitWritable(ctx, repo, t.TempDir()); err == nil {
		t.Fatal("a folder that is no worktree of the repository was given write access")
	}
}
