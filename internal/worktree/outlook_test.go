package worktree

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestOutlookAfterAnotherMerge: the case. Two agents fork from
// the same HEAD; a's work is merged; b's diff is still against where it
// forked (its fork point, not the new HEAD), it is 1 ahead and 2 behind
// (a's work and the merge commit),
// and the outlook says what merging b would bring, or where it conflicts.
func TestOutlookAfterAnotherMerge(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "shared.txt"), []byte("one\n"), 0o644)
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "start")
	start := run(t, repo, "rev-parse", "HEAD")
	m := New(t.TempDir())
	ctx := context.Background()
	ka, kb := troupe.RuntimeKey{Project: "p1", Agent: "a"}, troupe.RuntimeKey{Project: "p1", Agent: "b"}
	sa, sb := troupe.AgentSpec{Name: "a", Workspace: Worktree}, troupe.AgentSpec{Name: "b", Workspace: Worktree}
	wa, err := m.Dir(ctx, ka, sa, repo)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := m.Dir(ctx, kb, sb, repo)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wa, "a.txt"), []byte("from a\n"), 0o644)
	os.WriteFile(filepath.Join(wb, "b.txt"), []byte("from b\n"), 0o644)
	run(t, wb, "add", "-A")
	run(t, wb, "commit", "-q", "-m", "b's first")
	if _, err := m.Merge(ctx, ka, sa, repo, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	head := run(t, repo, "rev-parse", "HEAD")

	d, err := m.Diff(ctx, kb, sb, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	o := d.Outlook
	if o.Base != "HEAD" || o.BaseCommit != head || o.ForkPoint != start || o.Ahead != 1 || o.Behind != 2 || o.Into != "main" {
		t.Fatalf("b's outlook after a's merge: %+v; want base HEAD at %s, forked at %s, 1 ahead, 2 behind, into main", o, head, start)
	}
	if !slices.Equal(o.Brings, []string{"b.txt"}) || o.BringsCount != 1 || len(o.Conflicts) > 0 || o.Merged || o.Unknown != "" {
		t.Errorf("what merging b brings: %+v; want b.txt alone", o)
	}
	// The list says the same.
	l, err := m.List(ctx, "p1", repo, []troupe.AgentSpec{sa, sb})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range l.Worktrees {
		if in.Agent == "b" && (in.ForkPoint != start || in.Ahead != 1 || in.Behind != 2 || in.BaseCommit != head) {
			t.Errorf("b in the list: %+v", in)
		}
	}

	// Uncommitted work of b that conflicts with the checkout: foreseen,
	// and nothing changed by the foresight.
	run(t, repo, "commit", "-q", "--allow-empty", "-m", "noop")
	os.WriteFile(filepath.Join(repo, "shared.txt"), []byte("person\n"), 0o644)
	run(t, repo, "commit", "-q", "-am", "person edits shared")
	os.WriteFile(filepath.Join(wb, "shared.txt"), []byte("agent\n"), 0o644)
	headBefore, branchBefore := run(t, repo, "rev-parse", "HEAD"), run(t, repo, "rev-parse", "refs/heads/"+Branch("b"))
	d, err = m.Diff(ctx, kb, sb, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Outlook.Conflicts, []string{"shared.txt"}) || d.Outlook.Behind != 4 {
		t.Errorf("b's outlook with a conflicting edit: %+v; want shared.txt in conflict, 4 behind", d.Outlook)
	}
	if run(t, repo, "rev-parse", "HEAD") != headBefore || run(t, repo, "rev-parse", "refs/heads/"+Branch("b")) != branchBefore {
		t.Errorf("the outlook moved a ref")
	}
	if st := run(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the outlook changed the checkout: %q", st)
	}
}
