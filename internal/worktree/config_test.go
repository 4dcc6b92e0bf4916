package worktree

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestIsToolConfig(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{".troupe/team.toml", true},
		{".troupe/prompts/lead.md", true},
		{".troupe", true}, // a link in place of the folder
		{".claude/settings.json", true},
		{".claude/settings.local.json", true},
		{"sub/.claude/commands/x.md", true},
		{".codex/config.toml", true},
		{".opencode/agent/a.md", true},
		{"opencode.json", true},
		{"opencode.jsonc", true},
		{"web/opencode.json", true},
		{".mcp.json", true},
		{"pkg/.mcp.json", true},
		{".gitattributes", true},
		{"docs/.gitattributes", true},
		{".gitmodules", true},
		{".gitignore", true},
		{".github/workflows/ci.yml", true},
		{".gitlab-ci.yml", true},
		{".vscode/settings.json", true},
		{".vscode/tasks.json", true},
		{".envrc", true},
		// What a case-insensitive file system (macOS) reads as the same.
		{".Troupe/team.toml", true},
		{".CLAUDE/settings.json", true},
		{".GitAttributes", true},
		{".MCP.json", true},
		{".tr\u200coupe/team.toml", true},
		{".troupe./team.toml", true},
		{".troupe /team.toml", true},
		{"OpenCode.JSON", true},
		// Prompt text and ordinary files.
		{"AGENTS.md", false},
		{"CLAUDE.md", false},
		{"sub/CLAUDE.md", false},
		{"README.md", false},
		{"main.go", false},
		{"troupe/team.toml", false},
		{"docs/claude/notes.md", false},
		{"x.gitignore", false},
		{"opencode.json.bak", false},
		{"mcp.json", false},
		{"src/.envrc.example", false},
		{"vscode/settings.json", false},
	} {
		if got := IsToolConfig(c.path); got != c.want {
			t.Errorf("IsToolConfig(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

// gitRepo makes a repository with one commit of files (path → content).
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	repo := t.TempDir()
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755)
		os.WriteFile(filepath.Join(repo, p), []byte(c), 0o644)
	}
	run(t, repo, "init", "-q", "-b", "main")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "start")
	return repo
}

func write(t *testing.T, dir, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMergeRefusesToolConfig: a branch that changes the team file (a
// commit of the agent's) and Claude's settings (uncommitted) is refused,
// naming both and the flag, with the project untouched; naming one is not
// enough; naming both merges them.
func TestMergeRefusesToolConfig(t *testing.T) {
	repo := gitRepo(t, map[string]string{"README": "hi\n", ".troupe/team.toml": "[[agent]]\nname = \"a\"\n"})
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt, ".troupe/team.toml", "[[agent]]\nname = \"a\"\nallowed_tools = [\"Bash\"]\n")
	run(t, wt, "commit", "-q", "-am", "widen")
	write(t, wt, ".claude/settings.json", `{"permissions":{"allow":["Bash"]}}`)
	write(t, wt, "work.txt", "work\n")
	head := run(t, repo, "rev-parse", "HEAD")

	d, err := m.Diff(ctx, k, spec, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".claude/settings.json", ".troupe/team.toml"}; !slices.Equal(d.Config, want) {
		t.Errorf("Diff's Config = %q, want %q", d.Config, want)
	}
	for _, include := range [][]string{nil, {".troupe/team.toml"}, {".troupe/team.toml", ".claude"}} {
		_, err := m.Merge(ctx, k, spec, repo, MergeOptions{IncludeConfig: include})
		if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), ".claude/settings.json") || !strings.Contains(err.Error(), "--include-config .claude/settings.json") {
			t.Fatalf("Merge naming %q: %v; want a refusal naming .claude/settings.json and the flag", include, err)
		}
		if include == nil && !strings.Contains(err.Error(), ".troupe/team.toml") {
			t.Errorf("Merge naming nothing: %v; want .troupe/team.toml named", err)
		}
		if got := run(t, repo, "rev-parse", "HEAD"); got != head {
			t.Fatalf("a refused merge moved HEAD to %s", got)
		}
		if b, _ := os.ReadFile(filepath.Join(repo, ".troupe/team.toml")); strings.Contains(string(b), "Bash") {
			t.Fatal("a refused merge changed the team file")
		}
	}
	res, err := m.Merge(ctx, k, spec, repo, MergeOptions{IncludeConfig: []string{".troupe/team.toml", ".claude/settings.json"}})
	if err != nil || !res.Merged || !slices.Equal(res.Config, []string{".claude/settings.json", ".troupe/team.toml"}) {
		t.Fatalf("Merge naming both = %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, ".troupe/team.toml")); !strings.Contains(string(b), "Bash") {
		t.Fatalf("after the merge the team file = %q", b)
	}
}

// TestMergeChecksWhatItMerges: the branch's base brings a config change
// the agent's diff does not show (a base other than the person's branch):
// the merge still names it.
func TestMergeChecksWhatItMerges(t *testing.T) {
	repo := gitRepo(t, map[string]string{"README": "hi\n"})
	run(t, repo, "checkout", "-q", "-b", "dev")
	write(t, repo, ".mcp.json", `{"mcpServers":{}}`)
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-q", "-m", "dev's mcp")
	run(t, repo, "checkout", "-q", "main")
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree, Base: "dev"}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt, "work.txt", "work\n")
	if d, err := m.Diff(ctx, k, spec, repo, false); err != nil || len(d.Config) != 0 {
		t.Fatalf("Diff = %+v, %v; want no config of its own", d, err)
	}
	if _, err := m.Merge(ctx, k, spec, repo, MergeOptions{}); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), ".mcp.json") {
		t.Fatalf("Merge = %v; want a refusal naming .mcp.json", err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".mcp.json")); err == nil {
		t.Fatal("the refused merge wrote .mcp.json")
	}
}

// TestDiffShowsToolConfigFirstAsText: a branch that marks the team file
// -diff and binary in .gitattributes, with a textconv driver of the
// repository's config, still shows the team file's change as text, after
// .gitattributes and before the other files; no driver ran.
func TestDiffShowsToolConfigFirstAsText(t *testing.T) {
	repo := gitRepo(t, map[string]string{"README": "hi\n", ".troupe/team.toml": "[[agent]]\nname = \"a\"\n", "a.txt": "a\n"})
	marker := filepath.Join(t.TempDir(), "ran")
	run(t, repo, "config", "diff.hide.textconv", "touch "+marker+"; echo nothing to see #")
	run(t, repo, "config", "diff.hide.binary", "true")
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt, ".gitattributes", ".troupe/* -diff binary\nsecret.txt diff=hide\n")
	write(t, wt, ".troupe/team.toml", "[[agent]]\nname = \"a\"\npermission_mode = \"bypassPermissions\"\n")
	write(t, wt, "a.txt", "a changed\n")
	write(t, wt, "-first.txt", "first by name\n")
	write(t, wt, "secret.txt", "the hidden change\n")
	run(t, wt, "add", "-A")
	run(t, wt, "commit", "-q", "-m", "hide")
	for _, stat := range []bool{false, true} {
		d, err := m.Diff(ctx, k, spec, repo, stat)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d.Config, []string{".gitattributes", ".troupe/team.toml"}) {
			t.Errorf("Config = %q", d.Config)
		}
		if strings.Contains(d.Diff, "Bin") {
			t.Errorf("stat %v: a change shown as binary:\n%s", stat, d.Diff)
		}
		if stat {
			continue
		}
		if !strings.Contains(d.Diff, `+permission_mode = "bypassPermissions"`) || !strings.Contains(d.Diff, "+the hidden change") || strings.Contains(d.Diff, "nothing to see") {
			t.Errorf("diff hides a change:\n%s", d.Diff)
		}
		ga, team, first := strings.Index(d.Diff, "diff --git a/.gitattributes"), strings.Index(d.Diff, "diff --git a/.troupe/team.toml"), strings.Index(d.Diff, "diff --git a/-first.txt")
		if ga < 0 || team < ga || first < team {
			t.Errorf("config files not first (.gitattributes at %d, team at %d, -first.txt at %d):\n%s", ga, team, first, d.Diff)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the repository's textconv ran")
	}
}

// TestGitRunsNoRepositoryPrograms: hooks, an fsmonitor, a filter and a
// merge driver that the repository's own .git names (which an agent's
// worktree shares) do not run in Dir, Diff or Merge; a merge that needs
// the merge driver is refused, saying why.
func TestGitRunsNoRepositoryPrograms(t *testing.T) {
	repo := gitRepo(t, map[string]string{"README": "hi\n", "a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n", ".gitattributes": "*.txt filter=evil merge=evil\n"})
	marks := t.TempDir()
	script := filepath.Join(marks, "evil.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marks+"/ran-$1\ncat\n"), 0o755)
	for _, h := range []string{"post-checkout", "post-commit", "post-merge", "pre-commit", "pre-merge-commit", "reference-transaction", "post-index-change"} {
		os.WriteFile(filepath.Join(repo, ".git", "hooks", h), []byte("#!/bin/sh\ntouch "+marks+"/hook-"+h+"\n"), 0o755)
	}
	run(t, repo, "config", "filter.evil.clean", script+" clean")
	run(t, repo, "config", "filter.evil.smudge", script+" smudge")
	run(t, repo, "config", "filter.evil.required", "true")
	run(t, repo, "config", "merge.evil.driver", script+" merge")
	run(t, repo, "config", "core.fsmonitor", script+" fsmonitor")
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt, "a.txt", "1 agent\n2\n3\n4\n5\n6\n7\n8\n")
	write(t, wt, "b.txt", "new\n")
	if _, err := m.Diff(ctx, k, spec, repo, false); err != nil {
		t.Fatal(err)
	}
	// Both sides change a.txt: a three-way merge, the merge driver's.
	write(t, repo, "a.txt", "1\n2\n3\n4\n5\n6\n7\n8 person\n")
	run(t, repo, "-c", "core.hooksPath=/dev/null", "-c", "filter.evil.clean=", "-c", "filter.evil.required=false", "-c", "core.fsmonitor=false", "commit", "-q", "-am", "person")
	_, err = m.Merge(ctx, k, spec, repo, MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), "merge drivers") {
		t.Errorf("Merge needing the repository's merge driver = %v; want a refusal saying why", err)
	}
	// Without the driver's file the merge goes through.
	run(t, repo, "config", "--unset", "merge.evil.driver")
	if res, err := m.Merge(ctx, k, spec, repo, MergeOptions{}); err != nil || !res.Merged {
		t.Errorf("Merge = %+v, %v", res, err)
	}
	if ents, _ := os.ReadDir(marks); len(ents) != 1 {
		var ran []string
		for _, e := range ents {
			ran = append(ran, e.Name())
		}
		t.Errorf("programs of the repository ran: %q", ran)
	}
}

// TestMergeOfACutDiffNeedsForce: a diff too long to show whole refuses
// the merge saying so, unless forced.
func TestMergeOfACutDiffNeedsForce(t *testing.T) {
	repo := gitRepo(t, map[string]string{"README": "hi\n"})
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 99) + "\n"
	write(t, wt, "big.txt", strings.Repeat(line, MaxGitOutput/100+1000))
	head := run(t, repo, "rev-parse", "HEAD")
	if _, err := m.Merge(ctx, k, spec, repo, MergeOptions{}); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "is cut") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Merge of a cut diff = %v; want a refusal saying --force", err)
	}
	if run(t, repo, "rev-parse", "HEAD") != head {
		t.Fatal("the refused merge moved HEAD")
	}
	if res, err := m.Merge(ctx, k, spec, repo, MergeOptions{Force: true}); err != nil || !res.Merged {
		t.Fatalf("forced Merge = %+v, %v", res, err)
	}
}

// TestMergeMergesWhatWasRead: a merge given the tree of the diff the
// person read is refused once the agent has changed its work; a file the
// agent force-staged past its .gitignore, which the diff leaves out, is
// not merged unseen: the merge is refused until the diff shows it.
func TestMergeMergesWhatWasRead(t *testing.T) {
	repo := gitRepo(t, map[string]string{"README": "hi\n", ".gitignore": "*.env\n"})
	m := New(t.TempDir())
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	spec := troupe.AgentSpec{Name: "a", Workspace: Worktree}
	ctx := context.Background()
	wt, err := m.Dir(ctx, k, spec, repo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wt, "work.txt", "reviewed\n")
	read, err := m.Diff(ctx, k, spec, repo, false)
	if err != nil || read.Tree == "" || !strings.Contains(read.MergeCommand, "--expect "+read.Tree) {
		t.Fatalf("Diff = %+v, %v", read, err)
	}
	write(t, wt, "work.txt", "changed after the review\n")
	head := run(t, repo, "rev-parse", "HEAD")
	if _, err := m.Merge(ctx, k, spec, repo, MergeOptions{Tree: read.Tree}); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "changed since the diff you read") {
		t.Fatalf("Merge of a changed work = %v; want a refusal", err)
	}
	if run(t, repo, "rev-parse", "HEAD") != head {
		t.Fatal("the refused merge moved HEAD")
	}
	// Force-staged past .gitignore: not in the diff, so not merged.
	write(t, wt, "secret.env", "TOKEN=agent's\n")
	run(t, wt, "add", "-f", "secret.env")
	d, err := m.Diff(ctx, k, spec, repo, false)
	if err != nil || strings.Contains(d.Diff, "secret.env") {
		t.Fatalf("Diff = %q, %v", d.Diff, err)
	}
	_, err = m.Merge(ctx, k, spec, repo, MergeOptions{Tree: d.Tree})
	if !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "is not the work its diff showed") {
		t.Fatalf("Merge with a force-staged file = %v; want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "secret.env")); err == nil {
		t.Fatal("secret.env was merged unseen")
	}
	// Committed now, the diff shows it; that work merges.
	d, err = m.Diff(ctx, k, spec, repo, false)
	if err != nil || !strings.Contains(d.Diff, "+TOKEN=agent's") {
		t.Fatalf("Diff after = %q, %v", d.Diff, err)
	}
	if res, err := m.Merge(ctx, k, spec, repo, MergeOptions{Tree: d.Tree}); err != nil || !res.Merged {
		t.Fatalf("Merge of the work read = %+v, %v", res, err)
	}
}
