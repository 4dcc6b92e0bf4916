package project

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPromptFileMustExist(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"lead\"\nengine = \"fake\"\nprompt_file = \"prompts/lead.md\"\n"), 0o644)
	r, err := Open(context.Background(), Options{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }() // owns the file watcher
	t.Cleanup(func() { cancel(); <-done })
	info, err := r.Add(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := `team.toml:1: agent "lead": prompt_file: `
	if !strings.Contains(info.TeamError, want) || !strings.Contains(info.TeamError, "prompts/lead.md is not a readable file") {
		t.Fatalf("team error = %q, want it to contain %q", info.TeamError, want)
	}
	os.MkdirAll(filepath.Join(dir, "prompts"), 0o755)
	os.WriteFile(filepath.Join(dir, "prompts", "lead.md"), []byte("You lead."), 0o644)
	r.reload(context.Background(), info.ID, false)
	if got, _ := r.Get(info.ID); got.TeamError != "" || got.Team == nil || len(got.Team.Agents) != 1 {
		t.Fatalf("after creating the prompt file: %+v", got)
	}
}
