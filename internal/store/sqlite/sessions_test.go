package sqlite

import (
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/runtime/sessionstest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestSessionsContract(t *testing.T) {
	sessionstest.Run(t, func(t *testing.T) sessionstest.Store { return openTest(t, newPath(t)).Sessions() })
}

// TestSessionIDSurvivesReopen: a daemon restart (or crash) keeps each
// agent's conversation id, so its next session resumes it.
func TestSessionIDSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := newPath(t)
	k := troupe.RuntimeKey{Project: "p1", Agent: "lead"}
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Sessions().SetSessionID(ctx, k, "claude", "sess-1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, path)
	if eng, id, err := db.Sessions().SessionID(ctx, k); err != nil || eng != "claude" || id != "sess-1" {
		t.Errorf("after reopen SessionID = %q, %q, %v; want claude, sess-1", eng, id, err)
	}
}

// TestSessionsMigratesFromVersion5: a database of the schema before the
// sessions table gets it, keeping what it held.
func TestSessionsMigratesFromVersion5(t *testing.T) {
	ctx := t.Context()
	path := newPath(t)
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Projects().AddProject(ctx, troupe.Project{ID: "p1", Path: "/x", Name: "x", AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rawExec(t, path, "DROP TABLE openai_messages", "DROP INDEX messages_from", "DROP INDEX messages_to", "DROP TABLE journal_events", "DROP TABLE journal_turns", "DROP TABLE agent_sessions",
		"ALTER TABLE memory_notes DROP COLUMN stamp", "DROP TABLE claude_files", "DROP TABLE claude_agent_sessions", "DROP TABLE project_approvals", "ALTER TABLE tasks DROP COLUMN runner", "DROP TABLE check_results",
		"ALTER TABLE requests DROP COLUMN verify", "ALTER TABLE requests DROP COLUMN tries", "ALTER TABLE requests DROP COLUMN tried", "ALTER TABLE requests DROP COLUMN checking", "ALTER TABLE requests DROP COLUMN verdict", "DROP TABLE attempts", "PRAGMA user_version = 5")
	db = openTest(t, path)
	if ps, err := db.Projects().Projects(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("projects after migration = %v, %v", ps, err)
	}
	if err := db.Sessions().SetSessionID(ctx, troupe.RuntimeKey{Project: "p1", Agent: "lead"}, "fake", "s"); err != nil {
		t.Errorf("SetSessionID after migrating from version 5: %v", err)
	}
}
