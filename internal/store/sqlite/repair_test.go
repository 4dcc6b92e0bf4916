package sqlite

import (
	"os"
	"testing"
)

func TestRepairExportsWhatIsReadable(t *testing.T) {
	const n = 5000
	path := damagedDB(t, n)
	rep, err := Repair(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if _, err := os.Stat(rep.Damaged); err != nil {
		t.Errorf("the damaged file was not kept: %v", err)
	}
	if rep.Version != int64(latestVersion()) {
		t.Errorf("version %d, want %d", rep.Version, latestVersion())
	}
	byName := map[string]TableReport{}
	for _, tr := range rep.Tables {
		byName[tr.Table] = tr
		t.Logf("%+v", tr)
	}
	m := byName["messages"]
	if m.Unreadable == 0 || m.Lost == 0 || m.Kept == 0 || m.Kept+m.Lost != n || m.RestLost {
		t.Errorf("messages: %+v; want some kept, some lost, %d in all", m, n)
	}
	if p := byName["projects"]; p.Kept != 1 || p.Lost != 0 {
		t.Errorf("projects: %+v; want the one project kept", p)
	}
	if _, ok := byName["memory_fts_data"]; ok {
		t.Error("the FTS index's shadow tables were copied; they are rebuilt")
	}

	db := openTest(t, path) // quick_check passes
	if err := db.Check(t.Context()); err != nil {
		t.Fatalf("integrity_check of the repaired file: %v", err)
	}
	var count, maxID, seq int64
	db.r.QueryRow("SELECT count(*), max(id) FROM messages").Scan(&count, &maxID)
	db.r.QueryRow("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").Scan(&seq)
	if count != m.Kept || seq < n {
		t.Errorf("repaired file: %d messages (max id %d), sequence %d; want %d and a sequence of at least %d", count, maxID, seq, m.Kept, n)
	}
	if ps, err := db.Projects().Projects(t.Context()); err != nil || len(ps) != 1 {
		t.Errorf("projects of the repaired file: %v %v", ps, err)
	}
}

func TestRepairRefusesWhatIsNotATroupeDatabase(t *testing.T) {
	path := newPath(t)
	os.WriteFile(path, []byte("not a database at all, just some text that is long enough to pass for a header, or not"), 0o600)
	if _, err := Repair(t.Context(), path, Options{}); err == nil {
		t.Fatalf("Repair of a text file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(path); len(b) == 0 {
		t.Error("the text file was moved or emptied")
	}
}
