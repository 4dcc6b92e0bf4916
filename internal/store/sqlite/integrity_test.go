package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// fillMessages stores n queued messages of about 200 bytes each (in
// transactions of 10,000), and a project.
func fillMessages(t testing.TB, db *DB, n int) {
	t.Helper()
	ctx := context.Background()
	if err := db.Projects().AddProject(ctx, troupe.Project{ID: "p", Path: "/p", AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("lorem ipsum ", 16)
	for i := 0; i < n; {
		err := db.write(ctx, func(tx *sql.Tx) error {
			for j := 0; j < 10_000 && i < n; j, i = j+1, i+1 {
				_, err := insertMessage(ctx, tx, troupe.Message{Project: "p", To: troupe.AgentID(fmt.Sprintf("a%d", i%10)),
					From: troupe.Person, Kind: troupe.KindMessage, Text: fmt.Sprintf("%d %s", i, text),
					State: troupe.MsgQueued, CreatedAt: time.Now()})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// damage overwrites one page of the closed database at path with random
// bytes (a fixed seed): page is counted from the middle of the file.
func damage(t testing.TB, path string, page int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096
	off := (fi.Size()/pageSize/2 + page) * pageSize
	junk := make([]byte, pageSize)
	r := rand.New(rand.NewPCG(1, uint64(page)))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(junk, off); err != nil {
		t.Fatal(err)
	}
}

// leafPage returns the number (from the middle of the file, as damage
// counts) of the first b-tree table leaf page (type 0x0d) at or after the
// middle of the file: with many messages, one of theirs.
func leafPage(t testing.TB, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096
	mid := int64(len(b)) / pageSize / 2
	for p := mid; p < int64(len(b))/pageSize; p++ {
		if b[p*pageSize] == 0x0d {
			return p - mid
		}
	}
	t.Fatal("no table leaf page past the middle")
	return 0
}

// damagedDB makes a closed troupe database of n messages with a table
// leaf page in its middle overwritten.
func damagedDB(t testing.TB, n int) string {
	t.Helper()
	path := newPath(t)
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fillMessages(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, path, leafPage(t, path))
	return path
}

func TestOpenRefusesADamagedFile(t *testing.T) {
	path := damagedDB(t, 5000)
	before, _ := os.ReadFile(path)
	_, err := Open(t.Context(), path, Options{})
	var de *DamagedError
	if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a damaged file: %v, want a *DamagedError matching ErrCorrupt", err)
	}
	abs, _ := filepath.Abs(path)
	for _, want := range []string{
		"open store " + path + ": the database is damaged (quick_check: ",
		"keep a copy of it (cp " + abs + " " + abs + ".bad), then run troupe doctor --repair --state-dir " + filepath.Dir(abs) +
			" to export what is readable into a fresh database",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("Open wrote to the damaged file")
	}
}

// TestOpenFindsEachDamagedPage: quick_check catches garbage in any of
// several pages around the middle of the file (table and index pages of
// messages), not only the one the other tests damage.
func TestOpenFindsEachDamagedPage(t *testing.T) {
	for page := int64(-3); page <= 3; page++ {
		t.Run(fmt.Sprint(page), func(t *testing.T) {
			path := newPath(t)
			db, err := Open(t.Context(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			fillMessages(t, db, 5000)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			damage(t, path, page)
			_, err = Open(t.Context(), path, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("page %d: %v", page, err)
			}
		})
	}
}

// BenchmarkOpenChecked measures Open, quick_check included, of an empty
// database and of one with 100,000 messages; and quick_check and
// integrity_check alone on the big one.
func BenchmarkOpenChecked(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		path := newPath(b)
		db, err := Open(b.Context(), path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if n > 0 {
			fillMessages(b, db, n)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		fi, _ := os.Stat(path)
		b.Run(fmt.Sprintf("messages=%d/open", n), func(b *testing.B) {
			for b.Loop() {
				db, err := Open(b.Context(), path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
			b.ReportMetric(float64(fi.Size())/1e6, "MB")
		})
		db, err = Open(b.Context(), path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, check := range []string{"quick_check", "integrity_check"} {
			b.Run(fmt.Sprintf("messages=%d/%s", n, check), func(b *testing.B) {
				for b.Loop() {
					if err := runCheck(b.Context(), db.r, check, db.abs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		db.Close()
	}
}

// TestWritesRefusedOnceTheFileIsGone: a write after the file was deleted
// fails with ErrGone and tells OnGone once; so does every later write. A
// replaced file is caught the same way.
func TestWritesRefusedOnceTheFileIsGone(t *testing.T) {
	for _, replace := range []bool{false, true} {
		path := newPath(t)
		var told []error
		db, err := Open(t.Context(), path, Options{OnGone: func(err error) { told = append(told, err) }})
		if err != nil {
			t.Fatal(err)
		}
		add := func(id string) error {
			return db.Projects().AddProject(t.Context(), troupe.Project{ID: troupe.ProjectID(id), Path: "/" + id, AddedAt: time.Now()})
		}
		if err := add("a"); err != nil {
			t.Fatal(err)
		}
		os.Remove(path)
		if replace {
			os.WriteFile(path, nil, 0o600)
		}
		for _, id := range []string{"b", "c"} {
			if err := add(id); !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), path) {
				t.Errorf("replace=%v: write after the file went: %v, want ErrGone naming the file", replace, err)
			}
		}
		if len(told) != 1 || !errors.Is(told[0], ErrGone) {
			t.Errorf("replace=%v: OnGone told %v, want once", replace, told)
		}
		db.Close()
		os.Remove(path)
		if _, err := os.Stat(path + "-wal"); err == nil {
			t.Errorf("replace=%v: Close left the -wal of the deleted file", replace)
		}
	}
}

func TestOpenRefusesAWALWithoutItsDatabase(t *testing.T) {
	path := newPath(t)
	os.WriteFile(path+"-wal", []byte("frames of a database that is gone"), 0o600)
	if _, err := Open(t.Context(), path, Options{}); err == nil || !strings.Contains(err.Error(), "-wal exists without") {
		t.Fatalf("Open beside a stray WAL: %v, want a refusal", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("Open created the database beside a stray WAL")
	}
}
