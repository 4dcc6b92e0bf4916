package sqlite

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/journal/journaltest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestJournalStoreContract(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journal.Store { return openTest(t, newPath(t)).Journal() })
}

// TestJournalLeavesTheWriterFullySynchronous: after a journal batch (which
// commits with synchronous=NORMAL) the writer connection is back to FULL
// for the inbox (C6).
func TestJournalLeavesTheWriterFullySynchronous(t *testing.T) {
	db := openTest(t, newPath(t))
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	if err := db.Journal().Record(t.Context(), journal.Entry{Key: k, Turn: "t1", Start: &journal.Start{}}); err != nil {
		t.Fatal(err)
	}
	var sync int
	if err := db.w.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("writer synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
}
