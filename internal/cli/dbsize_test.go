package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorShowsTheDatabaseSize: the database's size, its WAL counted,
// and the retention rule; nothing without a database.
func TestDoctorShowsTheDatabaseSize(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	storeSize(&out, dir)
	if out.Len() != 0 {
		t.Errorf("without a database: %q, want nothing", out.String())
	}
	db := filepath.Join(dir, "troupe.db")
	if err := os.WriteFile(db, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db+"-wal", make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	storeSize(&out, dir)
	if got := out.String(); !strings.HasPrefix(got, "database "+db+": 4.0 MB") || !strings.Contains(got, "30 days") {
		t.Errorf("storeSize = %q, want the database's 4.0 MB and the retention", got)
	}
}
