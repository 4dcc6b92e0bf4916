package project

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestParseTeamWorkspace(t *testing.T) {
	team, err := ParseTeam("team.toml", []byte(leadHead+"\nworkspace = \"worktree\"\nbase = \"main\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := team.Agents[0]; a.Workspace != "worktree" || a.Base != "main" {
		t.Fatalf("agent = %+v", a)
	}
	for src, field := range map[string]string{
		"workspace = \"tree\"": "workspace",
		"workspace = 1":        "workspace",
		"base = \"\"":          "base",
		"base = \"--exec=x\"":  "base",
	} {
		_, err := ParseTeam("team.toml", []byte(leadHead+"\n"+src+"\n"))
		var fe *troupe.FieldError
		if !errors.As(err, &fe) || !strings.HasSuffix(fe.Field, field) {
			t.Errorf("%s: error %v; want one at %s", src, err, field)
		}
	}
}

func TestCheckWorkspace(t *testing.T) {
	dir := t.TempDir()
	a := troupe.AgentSpec{Name: "lead", Workspace: "worktree"}
	var fe *troupe.FieldError
	if err := checkWorkspace(dir, a); !errors.As(err, &fe) || fe.Field != "workspace" || !strings.Contains(fe.Msg, "git init") {
		t.Fatalf("not a repository: %v", err)
	}
	if err := checkWorkspace(dir, troupe.AgentSpec{Name: "lead", Base: "main"}); !errors.As(err, &fe) || fe.Field != "base" {
		t.Fatalf("base without worktree: %v", err)
	}
	cmd := exec.Command("git", "init", "-q", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if err := checkWorkspace(dir, a); !errors.As(err, &fe) || !strings.Contains(fe.Msg, "no commit") {
		t.Fatalf("no commit: %v", err)
	}
	cmd = exec.Command("git", "commit", "-q", "--allow-empty", "-m", "x")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git commit: %v %s", err, out)
	}
	if err := checkWorkspace(dir, a); err != nil {
		t.Fatal(err)
	}
	a.Base = "nope"
	if err := checkWorkspace(dir, a); !errors.As(err, &fe) || fe.Field != "base" {
		t.Fatalf("bad base: %v", err)
	}
}

// TestCheckWorkspaceOldGit: with a git older than 2.38 on PATH, an agent
// with workspace = "worktree" is a team error at workspace naming the
// version found and the one needed.
func TestCheckWorkspaceOldGit(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(bin+"/git", []byte("#!/bin/sh\necho 'git version 2.34.1'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	var fe *troupe.FieldError
	err := checkWorkspace(t.TempDir(), troupe.AgentSpec{Name: "lead", Workspace: "worktree"})
	if !errors.As(err, &fe) || fe.Field != "workspace" || !strings.Contains(fe.Msg, "git 2.34.1") || !strings.Contains(fe.Msg, "2.38") {
		t.Fatalf("old git: %v", err)
	}
}
