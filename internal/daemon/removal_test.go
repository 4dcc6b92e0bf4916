package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// TestProjectRemovalCheckpointsFirst: removing a project first makes a
// checkpoint ("project remove") of each agent's workspace, its worktree
// or the project's folder; one of a worktree that cannot be made refuses
// the removal, the project still registered.
func TestProjectRemovalCheckpointsFirst(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"a\"\nengine = \"fake\"\n\n[[agent]]\nname = \"w\"\nengine = \"fake\"\nworkspace = \"worktree\"\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-qm", "one"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	reg, err := project.Open(ctx, project.Options{Store: project.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	info, err := reg.Add(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	trees := worktree.New(root)
	w := troupe.RuntimeKey{Project: info.ID, Agent: "w"}
	spec, _, _ := reg.Agent(w)
	wt, err := trees.Dir(ctx, w, spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wt, "work.txt"), []byte("kept\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "folder.txt"), []byte("mine\n"), 0o644)
	r := &removal{ctx: ctx, log: slog.New(slog.DiscardHandler), reg: reg, trees: trees, cps: checkpoints{trees: trees, retention: worktree.DefaultRetention}}

	// The worktree's checkpoint cannot be made (its index's folder is a
	// file): refused, before anything else is done.
	block := filepath.Join(root, ".checkpoints", string(info.ID), "w")
	os.MkdirAll(filepath.Dir(block), 0o700)
	os.WriteFile(block, nil, 0o600)
	if _, err := r.Remove(ctx, info.ID); err == nil || !strings.Contains(err.Error(), "checkpoint the worktree of w") || !strings.Contains(err.Error(), "not removed") {
		t.Fatalf("removal with a checkpoint failing = %v, want refused", err)
	}
	if _, ok := reg.Get(info.ID); !ok {
		t.Fatal("the project was unregistered though its worktree had no checkpoint")
	}
	os.Remove(block)

	if err := r.checkpointAll(ctx, info.ID, dir); err != nil {
		t.Fatal(err)
	}
	for k, work := range map[troupe.RuntimeKey]string{w: wt, {Project: info.ID, Agent: "a"}: dir} {
		cps, err := trees.Checkpoints(ctx, k, work)
		if err != nil || len(cps) == 0 || cps[len(cps)-1].Reason != "project remove" {
			t.Fatalf("checkpoints of %s = %+v, %v; want one made before the removal", k.Agent, cps, err)
		}
	}
	d, err := trees.CheckpointDiff(ctx, w, wt, 1, false)
	if err != nil || !strings.Contains(d.Diff, "+kept") {
		t.Fatalf("the worktree's checkpoint = %+v, %v; want work.txt in it", d, err)
	}
}
