package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestAttackMergeWidensTeam: a worktree agent's branch changes the team
// file (committed with git, as the agent's shell could): troupe merge
// refuses it naming the file and the flag, with the person's checkout
// untouched; with --include-config naming it, it merges. Another agent's
// branch marks the team file -diff and binary in .gitattributes: troupe
// diff still shows the team file's change, as text, first, and the merge
// command it suggests (--expect, each file named) merges that work.
func TestAttackMergeWidensTeam(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, worktreeTeam)
	startDaemon(t, state, "--project", proj)
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
	tree := func(agent troupe.AgentID) string {
		t.Helper()
		if _, err := cl.Ask(ctx, p.ID, agent, "!cwd", 0); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(realState, "worktrees", string(p.ID), string(agent))
	}
	widened := worktreeTeam + "\n[[agent]]\nname = \"intruder\"\nengine = \"fake\"\n"

	// a: the team file widened in a commit, with ordinary work.
	wtA := tree("a")
	writeTeam(t, wtA, widened)
	os.WriteFile(filepath.Join(wtA, "work.txt"), []byte("work\n"), 0o644)
	gitIn(t, wtA, "add", "-A")
	gitIn(t, wtA, "commit", "-q", "-m", "widen the team")
	head := gitIn(t, proj, "rev-parse", "HEAD")
	_, errs, code := runCLI(t, state, proj, "merge", "a")
	if code == 0 || !strings.Contains(errs, ".troupe/team.toml") || !strings.Contains(errs, "--include-config .troupe/team.toml") {
		t.Fatalf("merge a: exit %d: %s; want a refusal naming .troupe/team.toml and --include-config", code, errs)
	}
	if now := gitIn(t, proj, "rev-parse", "HEAD"); now != head {
		t.Fatalf("the refused merge moved HEAD %s → %s", head, now)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml")); strings.Contains(string(b), "intruder") {
		t.Fatal("the refused merge changed the team file")
	}
	if _, err := os.Stat(filepath.Join(proj, "work.txt")); err == nil {
		t.Fatal("the refused merge brought work.txt")
	}
	out := mustTroupe(t, state, proj, "merge", "a", "--include-config", ".troupe/team.toml")
	if !strings.Contains(out, "merged troupe/a into main") || !strings.Contains(out, "tool configuration merged, as you named it: .troupe/team.toml") {
		t.Fatalf("merge a --include-config: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml")); !strings.Contains(string(b), "intruder") {
		t.Fatalf("after the merge the team file = %q", b)
	}

	// b: .gitattributes hides the team file's change as binary.
	wtB := tree("b")
	os.WriteFile(filepath.Join(wtB, ".gitattributes"), []byte(".troupe/* -diff binary\n"), 0o644)
	writeTeam(t, wtB, worktreeTeam+"\n[[agent]]\nname = \"hidden\"\nengine = \"fake\"\n")
	os.WriteFile(filepath.Join(wtB, "-first-by-name.txt"), []byte("first by name\n"), 0o644)
	gitIn(t, wtB, "add", "-A")
	gitIn(t, wtB, "commit", "-q", "-m", "hide it")
	out, errs, code = runCLI(t, state, proj, "diff", "b")
	if code != 0 {
		t.Fatalf("diff b: exit %d: %s", code, errs)
	}
	if strings.Contains(out, "Binary files") || !strings.Contains(out, `+name = "hidden"`) {
		t.Fatalf("diff b hides the team file's change:\n%s", out)
	}
	team, other := strings.Index(out, "diff --git a/.troupe/team.toml"), strings.Index(out, "diff --git a/-first-by-name.txt")
	if team < 0 || other < team {
		t.Errorf("diff b does not show the team file first (at %d, -first-by-name.txt at %d):\n%s", team, other, out)
	}
	if !strings.Contains(errs, "tool configuration") || !strings.Contains(errs, ".gitattributes, .troupe/team.toml") {
		t.Errorf("diff b's note = %q; want the tool configuration named", errs)
	}
	_, suggested, ok := strings.Cut(errs, "to merge exactly this work: troupe ")
	suggested, _, _ = strings.Cut(suggested, "\n")
	if !ok || !strings.HasPrefix(suggested, "merge b --expect ") || !strings.HasSuffix(suggested, "--include-config .gitattributes --include-config .troupe/team.toml") {
		t.Fatalf("diff b suggests %q", suggested)
	}
	if _, errs, code := runCLI(t, state, proj, "merge", "b", "--include-config", ".troupe/team.toml"); code == 0 || !strings.Contains(errs, "--include-config .gitattributes") {
		t.Errorf("merge b naming only the team file: exit %d: %s; want .gitattributes named", code, errs)
	}
	if out := mustTroupe(t, state, proj, strings.Fields(suggested)...); !strings.Contains(out, "merged troupe/b into main") {
		t.Fatalf("troupe %s: %s", suggested, out)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, ".troupe", "team.toml")); !strings.Contains(string(b), "hidden") {
		t.Fatalf("after merging b the team file = %q", b)
	}
}
