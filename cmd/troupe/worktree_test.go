package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

const worktreeTeam = `
[[agent]]
name = "a"
engine = "fake"
workspace = "worktree"
allowed_tools = ["run_in_background"]

[[agent]]
name = "b"
engine = "fake"
workspace = "worktree"
allowed_tools = ["run_in_background"]
`

// gitIn runs git in dir (a test identity, no user config) and returns its
// trimmed output.
func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=person", "GIT_AUTHOR_EMAIL=person@example.com",
		"GIT_COMMITTER_NAME=person", "GIT_COMMITTER_EMAIL=person@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitProject makes a git repository with one commit holding the team.
func gitProject(t testing.TB, team string) string {
	t.Helper()
	proj := t.TempDir()
	writeTeam(t, proj, team)
	os.WriteFile(filepath.Join(proj, "README"), []byte("hello\n"), 0o644)
	gitIn(t, proj, "init", "-q", "-b", "main")
	gitIn(t, proj, "add", "-A")
	gitIn(t, proj, "commit", "-q", "-m", "start")
	return proj
}

// TestWorktreeTwoAgentsDiffMergeConflict: two agents with worktrees write
// the same file through background tasks; both diffs show it; the worktrees
// survive a daemon restart; the first merge is clean, the second is
// refused naming the file, with the person's tree unchanged.
func TestWorktreeTwoAgentsDiffMergeConflict(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, worktreeTeam)
	d := startDaemon(t, state, "--project", proj)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	realState, _ := filepath.EvalSymlinks(state)
	for _, agent := range []troupe.AgentID{"a", "b"} {
		want := filepath.Join(realState, "worktrees", string(p.ID), string(agent))
		req, err := cl.Ask(ctx, p.ID, agent, "!cwd", 0)
		if err != nil || !strings.Contains(req.Answer, want) {
			t.Fatalf("%s's engine runs in %+v (%v); want %s", agent, req.Answer, err, want)
		}
		req, err = cl.Ask(ctx, p.ID, agent, "!bg printf 'from "+string(agent)+"\\n' > shared.txt\n!say {result}", 0)
		if err != nil || !strings.Contains(req.Answer, "started task") {
			t.Fatalf("%s could not start its task: %+v %v", agent, req, err)
		}
		waitTaskMessages(t, ctx, cl, p.ID, agent, 1)
		if b, err := os.ReadFile(filepath.Join(want, "shared.txt")); err != nil || string(b) != "from "+string(agent)+"\n" {
			t.Fatalf("%s's task wrote %q, %v in its worktree", agent, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(proj, "shared.txt")); err == nil {
		t.Fatal("an agent wrote into the person's tree")
	}
	if out := mustTroupe(t, state, proj, "diff", "a"); !strings.Contains(out, "shared.txt") || !strings.Contains(out, "+from a") {
		t.Fatalf("diff a:\n%s", out)
	}
	if out := mustTroupe(t, state, proj, "diff", "b", "--stat"); !strings.Contains(out, "shared.txt") || !strings.Contains(out, "1 file changed") {
		t.Fatalf("diff b --stat:\n%s", out)
	}

	// A restart keeps the worktrees and their work.
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("daemon stop: %v", err)
	}
	startDaemon(t, state, "--project", proj)
	if out := mustTroupe(t, state, proj, "diff", "b"); !strings.Contains(out, "+from b") {
		t.Fatalf("diff b after restart:\n%s", out)
	}

	if out := mustTroupe(t, state, proj, "merge", "a"); !strings.Contains(out, "merged troupe/a into main") {
		t.Fatalf("merge a: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "shared.txt")); string(b) != "from a\n" {
		t.Fatalf("after merge a, shared.txt = %q", b)
	}
	if author := gitIn(t, proj, "log", "-1", "--format=%an", "troupe/a"); author != "a" {
		t.Fatalf("a's work committed by %q; want the agent", author)
	}
	head := gitIn(t, proj, "rev-parse", "HEAD")

	_, errs, code := runCLI(t, state, proj, "merge", "b")
	if code == 0 || !strings.Contains(errs, "conflicts in shared.txt") {
		t.Fatalf("merge b: exit %d: %s; want a conflict naming shared.txt", code, errs)
	}
	if now := gitIn(t, proj, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a refused merge moved HEAD %s → %s", head, now)
	}
	if st := gitIn(t, proj, "status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Fatalf("a refused merge changed the person's tree:\n%s", st)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "shared.txt")); string(b) != "from a\n" {
		t.Fatalf("after the refused merge, shared.txt = %q", b)
	}

	// Reset needs --yes; remove refuses uncommitted work, keeps the branch.
	if _, _, code := runCLI(t, state, proj, "worktree", "reset", "b"); code == 0 {
		t.Fatal("worktree reset without --yes ran")
	}
	mustTroupe(t, state, proj, "worktree", "reset", "b", "--yes")
	if out := mustTroupe(t, state, proj, "diff", "b"); !strings.Contains(out, "no changes") {
		t.Fatalf("diff b after reset:\n%s", out)
	}
	wtB := filepath.Join(state, "worktrees", string(p.ID), "b")
	os.WriteFile(filepath.Join(wtB, "draft.txt"), []byte("draft\n"), 0o644)
	if _, errs, code := runCLI(t, state, proj, "worktree", "remove", "b"); code == 0 || !strings.Contains(errs, "draft.txt") {
		t.Fatalf("remove with uncommitted work: exit %d %s", code, errs)
	}
	if out := mustTroupe(t, state, proj, "worktree", "remove", "b", "--force"); !strings.Contains(out, "branch troupe/b kept") {
		t.Fatalf("remove --force: %s", out)
	}
	if _, err := os.Stat(wtB); err == nil {
		t.Fatal("worktree folder still there")
	}
	gitIn(t, proj, "rev-parse", "--verify", "troupe/b")
}

// TestWorktreeNeedsGitRepository: workspace = "worktree" in a folder that
// is not a git repository is a team error naming the field.
func TestWorktreeNeedsGitRepository(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, worktreeTeam)
	startDaemon(t, state)
	mustTroupe(t, state, proj, "project", "add")
	var ps []api.Project
	listJSON(mustTroupe(t, state, proj, "project", "list", "--json"), "projects", &ps)
	if len(ps) != 1 || !strings.Contains(ps[0].TeamError, "workspace") || !strings.Contains(ps[0].TeamError, "not a git repository") ||
		!strings.Contains(ps[0].TeamError, "team.toml:5") {
		t.Fatalf("projects = %+v; want a team error at workspace", ps)
	}
}

// TestWorktreeCopiesGetTheirOwn: a project and its cp -r copy (the same
// branch names in two repositories) get separate worktrees (C1).
func TestWorktreeCopiesGetTheirOwn(t *testing.T) {
	a := gitProject(t, worktreeTeam)
	b := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-r", a, b).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v %s", err, out)
	}
	ctx, cl, ps := serveProjects(t, a, b)
	var dirs []string
	for _, p := range ps {
		req, err := cl.Ask(ctx, p.ID, "a", "!cwd", 0)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, req.Answer)
		if !strings.Contains(req.Answer, string(p.ID)) {
			t.Fatalf("project %s's agent works in %s", p.ID, req.Answer)
		}
	}
	if dirs[0] == dirs[1] {
		t.Fatalf("both copies share the worktree %s", dirs[0])
	}
}

// TestWorktreeKeptOnRemoval: an agent removed from its team keeps its
// worktree and branch, said in the log and a worktree.kept event, and
// troupe worktree list shows it as an orphan (still diffable); removing the
// project then removes the clean worktree, keeps the one with uncommitted
// work saying why, keeps both branches and leaves the person's tree alone.
func TestWorktreeKeptOnRemoval(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, worktreeTeam)
	d := startDaemon(t, state, "--project", proj)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Ask(ctx, p.ID, "a", "!cwd", 0); err != nil {
		t.Fatal(err)
	}
	if req, err := cl.Ask(ctx, p.ID, "b", "!bg printf 'draft\\n' > draft.txt\n!say {result}", 0); err != nil || !strings.Contains(req.Answer, "started task") {
		t.Fatalf("b could not start its task: %+v %v", req, err)
	}
	waitTaskMessages(t, ctx, cl, p.ID, "b", 1)
	os.WriteFile(filepath.Join(proj, "mine.txt"), []byte("the person's own work\n"), 0o644)
	realState, _ := filepath.EvalSymlinks(state)
	wtA := filepath.Join(realState, "worktrees", string(p.ID), "a")
	wtB := filepath.Join(realState, "worktrees", string(p.ID), "b")

	// b leaves the team.
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeTeam(t, proj, "[[agent]]\nname = \"a\"\nengine = \"fake\"\nworkspace = \"worktree\"\n")
	var kept events.WorktreeKept
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Type == events.TypeWorktreeKept && ev.Agent == "b" && ev.Project == p.ID {
			json.Unmarshal(ev.Data, &kept)
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || kept.Path != wtB || kept.Branch != "troupe/b" || !strings.Contains(kept.Reason, "removed from the team") {
		t.Fatalf("worktree.kept = %+v, %v", kept, err)
	}
	if logs := d.logs.waitFor(10*time.Second, "agent removed from the team; its worktree and branch are kept", wtB); !strings.Contains(logs, "agent removed from the team; its worktree and branch are kept") || !strings.Contains(logs, wtB) {
		t.Fatalf("daemon log lacks the kept worktree:\n%s", logs)
	}
	var list api.WorktreeList
	if err := json.Unmarshal([]byte(mustTroupe(t, state, proj, "worktree", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Worktrees) != 2 {
		t.Fatalf("worktree list = %+v", list)
	}
	if a := list.Worktrees[0]; a.Agent != "a" || a.Orphan || !a.Exists || a.Dirty || a.Path != wtA || a.Branch != "troupe/a" || a.Ahead != 0 {
		t.Errorf("a = %+v", a)
	}
	if b := list.Worktrees[1]; b.Agent != "b" || !b.Orphan || !b.Exists || !b.Dirty || b.Changed != 1 || b.Path != wtB {
		t.Errorf("b = %+v", b)
	}
	if out := mustTroupe(t, state, proj, "worktree", "list"); !strings.Contains(out, "b (removed from the team)") || !strings.Contains(out, "uncommitted: 1 file") {
		t.Errorf("worktree list:\n%s", out)
	}
	if out := mustTroupe(t, state, proj, "diff", "b"); !strings.Contains(out, "+draft") {
		t.Errorf("diff of the removed agent:\n%s", out)
	}

	// The project goes: a's clean worktree with it, b's kept.
	out, errs, code := runCLI(t, state, proj, "project", "remove")
	if code != 0 || !strings.Contains(out, "a: worktree "+wtA+" removed; branch troupe/a kept") ||
		!strings.Contains(errs, "b: worktree "+wtB+" KEPT") || !strings.Contains(errs, "uncommitted changes (draft.txt)") {
		t.Fatalf("project remove: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(wtA); !os.IsNotExist(err) {
		t.Errorf("a's clean worktree is still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(wtB, "draft.txt")); err != nil || string(b) != "draft\n" {
		t.Errorf("b's work: %q %v", b, err)
	}
	gitIn(t, proj, "rev-parse", "--verify", "troupe/a")
	gitIn(t, proj, "rev-parse", "--verify", "troupe/b")
	if b, _ := os.ReadFile(filepath.Join(proj, "mine.txt")); string(b) != "the person's own work\n" {
		t.Errorf("the person's file = %q", b)
	}
	if st := gitIn(t, proj, "status", "--porcelain"); st != "M .troupe/team.toml\n?? mine.txt" {
		t.Errorf("the person's tree:\n%s", st)
	}
}

// TestWorktreeDemo runs examples/worktree-demo as its README says: run.sh
// makes a git repository of it and adds it to the running daemon; a and b
// rewrite greeting.txt each in its worktree; diff a shows a's change, merge
// a goes in, merge b is refused naming greeting.txt.
func TestWorktreeDemo(t *testing.T) {
	state := t.TempDir()
	startDaemon(t, state)
	script, _ := filepath.Abs("../../examples/worktree-demo/run.sh")
	cmd := exec.Command("sh", script, "--state-dir", state)
	cmd.Env = append(os.Environ(), "TROUPE="+binary, "TMPDIR="+t.TempDir(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	_, rest, ok := strings.Cut(string(out), "demo repository: ")
	if !ok || !strings.Contains(string(out), "registered ") {
		t.Fatalf("run.sh said:\n%s", out)
	}
	demo, _, _ := strings.Cut(rest, "\n")
	if st := gitIn(t, demo, "status", "--porcelain"); st != "" {
		t.Fatalf("the demo repository is not committed:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(demo, "run.sh")); err == nil {
		t.Error("run.sh was copied into the demo repository")
	}
	cl, _ := client.FromStateDir(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, agent := range []troupe.AgentID{"a", "b"} {
		if out := mustTroupe(t, state, demo, "ask", string(agent), "change the greeting"); !strings.Contains(out, "I am rewriting greeting.txt in my worktree: started task") {
			t.Fatalf("ask %s: %s", agent, out)
		}
		waitTaskMessages(t, ctx, cl, p.ID, agent, 1)
	}
	if out := mustTroupe(t, state, demo, "diff", "a"); !strings.Contains(out, "-Hello, world!") || !strings.Contains(out, "+Hello from agent a!") {
		t.Fatalf("diff a:\n%s", out)
	}
	if out := mustTroupe(t, state, demo, "merge", "a"); !strings.Contains(out, "a: merged troupe/a into main") {
		t.Fatalf("merge a: %s", out)
	}
	_, errs, code := runCLI(t, state, demo, "merge", "b")
	if code == 0 || !strings.Contains(errs, "conflicts in greeting.txt") {
		t.Fatalf("merge b: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(demo, "greeting.txt")); string(b) != "Hello from agent a!\n" {
		t.Fatalf("greeting.txt = %q", b)
	}
	t.Logf("run.sh:\n%s", out)
}
