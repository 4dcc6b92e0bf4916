package sqlite

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// The index's rows come back as saved, across a reopen; removed paths go.
func TestClaudeFilesRoundTrip(t *testing.T) {
	ctx := t.Context()
	path := newPath(t)
	db := openTest(t, path)
	first := time.Date(2026, 11, 29, 18, 19, 41, 233e6, time.UTC)
	a := claudesessions.File{Path: "/h/.claude/projects/-x/a.jsonl", Stamp: claudesessions.Stamp{Size: 10, ModTime: 99, Inode: 1 << 63},
		Offset: 8, Complete: true, Summary: claudesessions.Summary{ID: "a", Cwd: "/x", Title: "t", TitleKind: "ai", Prompt: "p", Version: "2.1.328",
			GitBranch: "main", First: first, Last: first.Add(time.Minute), Messages: 4, Model: "m", Skipped: 2}}
	b := claudesessions.File{Path: "/h/.claude/projects/-x/b.jsonl", Summary: claudesessions.Summary{ID: "b"}}
	if err := db.ClaudeSessions().SaveClaudeFiles(ctx, []claudesessions.File{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.ClaudeSessions().SaveClaudeFiles(ctx, nil, []string{b.Path}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, path)
	got, err := db.ClaudeSessions().ClaudeFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]claudesessions.File{a}, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// Every Claude session id an agent had is kept, not only its latest; other
// engines' ids are not Claude sessions.
func TestClaudeAgentSessionsKeepsHistory(t *testing.T) {
	ctx := t.Context()
	db := openTest(t, newPath(t))
	k := troupe.RuntimeKey{Project: "p1", Agent: "lead"}
	for _, id := range []string{"s1", "s2"} {
		if err := db.Sessions().SetSessionID(ctx, k, troupe.EngineClaude, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Sessions().SetSessionID(ctx, troupe.RuntimeKey{Project: "p1", Agent: "cx"}, "codex", "thread-1"); err != nil {
		t.Fatal(err)
	}
	got, err := db.ClaudeSessions().ClaudeAgentSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]claudesessions.AgentRef{"s1": k, "s2": k}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent sessions (-want +got):\n%s", diff)
	}
}
