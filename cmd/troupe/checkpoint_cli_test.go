package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestCheckpointsOfRealCLIShells (C18): what the pinned Claude Code's
// Bash tool and Codex's exec_command change on disk, through a shell and
// not through an edit tool, is in the checkpoint of the turn: a file
// written, a committed file removed; the person's index and stash do not
// move, and their status shows the agent's changes alone.
func TestCheckpointsOfRealCLIShells(t *testing.T) {
	for _, c := range shellCLIs() {
		t.Run(c.name, func(t *testing.T) {
			r := c.rig(t)
			git := func(args ...string) string { t.Helper(); return gitIn(t, r.proj, args...) }
			os.WriteFile(filepath.Join(r.proj, "README"), []byte("hi\n"), 0o644)
			os.WriteFile(filepath.Join(r.proj, "notes.txt"), []byte("one\n"), 0o644)
			git("init", "-q", "-b", "main")
			git("add", "-A")
			git("commit", "-q", "-m", "start")
			os.WriteFile(filepath.Join(r.proj, "notes.txt"), []byte("stashed\n"), 0o644)
			git("stash", "-q")
			os.WriteFile(filepath.Join(r.proj, "staged.txt"), []byte("staged\n"), 0o644)
			git("add", "staged.txt")
			stash, index := git("stash", "list", "--format=%H"), git("diff", "--cached", "--name-status")

			req := r.ask(troupe.AgentID(firstAgent(t, r)), c.call("echo v1 > f.txt && rm README && echo changed"))
			if req.State != troupe.ReqAnswered {
				t.Fatalf("the turn: %s %q %s", req.State, req.Answer, req.Error)
			}
			refs := strings.Fields(git("for-each-ref", "--format=%(refname)", "refs/troupe/checkpoints/"))
			if len(refs) != 1 {
				t.Fatalf("checkpoint refs = %q; want the turn's one", refs)
			}
			changed := git("diff-tree", "-r", "--name-status", "--no-renames", refs[0]+"^", refs[0])
			if !strings.Contains(changed, "A\tf.txt") || !strings.Contains(changed, "D\tREADME") {
				t.Fatalf("the turn's checkpoint changed:\n%s\nwant f.txt added and README removed by the shell", changed)
			}
			if got := git("show", refs[0]+":f.txt"); got != "v1" {
				t.Fatalf("f.txt in the checkpoint = %q", got)
			}
			if git("stash", "list", "--format=%H") != stash || git("diff", "--cached", "--name-status") != index {
				t.Fatalf("the person's stash or index moved")
			}
			if st := git("status", "--porcelain"); !strings.Contains(st, "D README") || !strings.Contains(st, "?? f.txt") || !strings.Contains(st, "A  staged.txt") {
				t.Fatalf("the person's status:\n%s", st)
			}
		})
	}
}

// firstAgent is the name of the rig's only agent.
func firstAgent(t *testing.T, r *claudeRig) string {
	t.Helper()
	agents, err := r.cl.Agents(r.ctx, r.p)
	if err != nil || len(agents) == 0 {
		t.Fatalf("agents = %+v, %v", agents, err)
	}
	return string(agents[0].Name)
}

// TestCheckpointsOfAWorktreeAgent (C18): a fake agent in a worktree of
// its own changes files through a shell in three turns; each turn has its
// checkpoint in the project's repository, holding exactly that turn's
// change, the oldest pruned by --checkpoints-keep; the person's own
// checkout, index and HEAD do not move.
func TestCheckpointsOfAWorktreeAgent(t *testing.T) {
	proj := gitProject(t, "[[agent]]\nname = \"w\"\nengine = \"fake\"\nworkspace = \"worktree\"\npermission_mode = \"bypassPermissions\"\n")
	index, _ := os.ReadFile(filepath.Join(proj, ".git", "index"))
	head := gitIn(t, proj, "rev-parse", "HEAD")
	// Two kept, whatever their age: the first of three turns is pruned.
	ctx, _, cl, p := serveProject(t, t.TempDir(), proj, nil, 2*time.Minute, "--checkpoints-keep", "2", "--checkpoints-keep-for", "0s")
	for _, sh := range []string{"echo zero > f.txt", "echo one > f.txt", "echo two > f.txt && rm README"} {
		if req, err := cl.Ask(ctx, p.ID, "w", "!sh "+sh, 0); err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("ask w %q: %+v %v", sh, req, err)
		}
	}
	refs := strings.Fields(gitIn(t, proj, "for-each-ref", "--format=%(refname)", "refs/troupe/checkpoints/"+string(p.ID)+"/w/"))
	if len(refs) != 2 {
		t.Fatalf("checkpoint refs = %q; want the two newest turns' (--checkpoints-keep 2)", refs)
	}
	for i, want := range []string{"M\tf.txt", "D\tREADME\nM\tf.txt"} {
		if got := gitIn(t, proj, "diff-tree", "-r", "--name-status", "--no-renames", refs[i]+"^", refs[i]); got != want {
			t.Errorf("turn %d's checkpoint changed %q; want %q", i+2, got, want)
		}
	}
	after, _ := os.ReadFile(filepath.Join(proj, ".git", "index"))
	if string(after) != string(index) || gitIn(t, proj, "rev-parse", "HEAD") != head || gitIn(t, proj, "status", "--porcelain") != "" {
		t.Fatalf("the person's checkout moved: status %q", gitIn(t, proj, "status", "--porcelain"))
	}
}
