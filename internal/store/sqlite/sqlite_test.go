package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/store/storetest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func openTest(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func newPath(t testing.TB) string { return filepath.Join(t.TempDir(), "troupe.db") }

// rawExec runs statements on a plain driver connection, outside Open's
// checks: how a test plays another program or a newer troupe.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// dirNames lists the names in dir, to catch -wal/-shm files left behind.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestProjectStoreContract(t *testing.T) {
	storetest.RunProjectStore(t, func(t *testing.T) project.Store {
		return openTest(t, newPath(t)).Projects()
	})
}

func TestOpenMigratesFromEmpty(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"no file", func(*testing.T, string) {}},
		{"empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			tc.prepare(t, path)
			db := openTest(t, path)
			ctx := t.Context()

			var version, appID int64
			var mode string
			if err := db.w.QueryRowContext(ctx,
				"SELECT user_version, application_id, journal_mode FROM pragma_user_version, pragma_application_id, pragma_journal_mode",
			).Scan(&version, &appID, &mode); err != nil {
				t.Fatal(err)
			}
			if version != int64(latestVersion()) || appID != applicationID || mode != "wal" {
				t.Errorf("user_version, application_id, journal_mode = %d, %#x, %s; want %d, %#x, wal",
					version, appID, mode, latestVersion(), applicationID)
			}

			rows, err := db.r.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
			if err != nil {
				t.Fatal(err)
			}
			var tables []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				tables = append(tables, n)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"messages", "project_teams", "projects", "requests"} {
				if !slices.Contains(tables, want) {
					t.Errorf("tables = %v, want %s among them", tables, want)
				}
			}
		})
	}
}

// TestOpenConnectionPragmas checks what every pooled connection gets from
// its DSN, including connections opened after the first.
func TestOpenConnectionPragmas(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx := t.Context()
	type pragmas struct{ fk, sync, busy, queryOnly int64 }
	read := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) pragmas {
		var p pragmas
		if err := q.QueryRowContext(ctx,
			"SELECT * FROM pragma_foreign_keys, pragma_synchronous, pragma_busy_timeout, pragma_query_only",
		).Scan(&p.fk, &p.sync, &p.busy, &p.queryOnly); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, want := read(db.w), (pragmas{1, 2, 5000, 0}); got != want {
		t.Errorf("writer pragmas (foreign_keys, synchronous, busy_timeout, query_only) = %v, want %v", got, want)
	}
	// Hold two read connections at once so the pool opens a second one
	// (the pool holds at least 4).
	var conns []*sql.Conn
	for range 2 {
		c, err := db.r.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if got, want := read(c), (pragmas{1, 2, 5000, 1}); got != want {
			t.Errorf("reader pragmas = %v, want %v", got, want)
		}
	}
	if _, err := conns[0].ExecContext(ctx, "DELETE FROM projects"); err == nil {
		t.Error("a write through a read connection succeeded, want it refused (query_only)")
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	path := newPath(t)
	db := openTest(t, path)
	if err := db.Projects().AddProject(t.Context(), troupe.Project{ID: "p", Path: "/p", AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group or others", filepath.Base(p), perm)
		}
	}
}

func TestOpenPathNeedsEscaping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?x=1#frag%20", "troupe.db")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db := openTest(t, path)
	if err := db.Projects().AddProject(t.Context(), troupe.Project{ID: "p", Path: "/p", AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, filepath.Dir(path)); !slices.Contains(names, "troupe.db") || len(names) != 3 {
		t.Errorf("files in the database's directory = %v, want troupe.db with its -wal and -shm", names)
	}
}

func TestOpenReopenKeepsData(t *testing.T) {
	path := newPath(t)
	ctx := t.Context()
	p := troupe.Project{ID: "p1", Path: "/w/one", Name: "one", AddedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}

	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Projects().AddProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := db.Projects().SaveTeam(ctx, p.ID, []byte("team")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, filepath.Dir(path)); !slices.Equal(names, []string{"troupe.db"}) {
		t.Errorf("files after Close = %v, want only troupe.db (WAL checkpointed and removed)", names)
	}

	db = openTest(t, path)
	ps, err := db.Projects().Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0] != p {
		t.Errorf("Projects after reopen = %v, want [%v]", ps, p)
	}
	if src, err := db.Projects().LastTeam(ctx, p.ID); err != nil || string(src) != "team" {
		t.Errorf("LastTeam after reopen = %q, %v; want \"team\"", src, err)
	}
}

// validDB returns the bytes of a closed troupe database holding a project
// and a team large enough to span several pages.
func validDB(t *testing.T) []byte {
	t.Helper()
	path := newPath(t)
	db, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := db.Projects().AddProject(ctx, troupe.Project{ID: "p1", Path: "/w/one", AddedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := db.Projects().SaveTeam(ctx, "p1", bytes.Repeat([]byte("x"), 64<<10)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// foreignDB builds a database of another program with the raw driver.
func foreignDB(t *testing.T, stmts ...string) []byte {
	t.Helper()
	path := newPath(t)
	rawExec(t, path, stmts...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenRefusesCorrupt(t *testing.T) {
	good := validDB(t)
	with := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }

	for _, tc := range []struct {
		name   string
		data   []byte
		reason string // a fragment of the reason in parentheses
	}{
		{"random bytes", randomBytes(8192), "no SQLite header"},
		{"short text file", []byte("hello\n"), "shorter than a SQLite header"},
		{"magic zeroed", with(func(b []byte) []byte { clear(b[:16]); return b }), "no SQLite header"},
		{"header randomized after magic", with(func(b []byte) []byte {
			copy(b[16:100], randomBytes(84))
			return b
		}), "damaged header"},
		{"whole header randomized", with(func(b []byte) []byte { copy(b[:100], randomBytes(100)); return b }), "no SQLite header"},
		{"cut inside the header", good[:60], "shorter than a SQLite header"},
		{"cut to one page", good[:4096], "malformed"},
		{"schema page trashed", with(func(b []byte) []byte {
			copy(b[100:4096], randomBytes(3996))
			return b
		}), "malformed"},
		{"another program's database", foreignDB(t,
			"CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('x')"),
			"no troupe application id"},
		{"another program's versioned database", foreignDB(t,
			"CREATE TABLE notes (body TEXT)", "PRAGMA user_version = 7"),
			"schema version 7 without troupe's application id"},
		{"another program's application id", foreignDB(t,
			"PRAGMA application_id = 1179210309", "CREATE TABLE notes (body TEXT)"),
			"application id 0x46495245 belongs to another program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(t.Context(), path, Options{})
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded, want a refusal")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("err = %v, want one matching ErrCorrupt", err)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != path {
				t.Errorf("err = %#v, want a *CorruptError for %s", err, path)
			}
			prefix := "open store " + path + ": " + path + " is not a troupe database or is corrupt ("
			suffix := "): move it aside or use another --state-dir"
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, suffix) ||
				!strings.Contains(msg, tc.reason) {
				t.Errorf("err = %q\nwant %q + reason containing %q + %q", msg, prefix, tc.reason, suffix)
			}
			assertUntouched(t, path, tc.data)
		})
	}
}

// assertUntouched checks that the file still holds want and that no other
// file appeared next to it.
func assertUntouched(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the refused file changed (%d bytes, was %d)", len(got), len(want))
	}
	if names := dirNames(t, filepath.Dir(path)); !slices.Equal(names, []string{filepath.Base(path)}) {
		t.Errorf("files after the refusal = %v, want only %s", names, filepath.Base(path))
	}
}

func TestOpenRefusesNewerVersion(t *testing.T) {
	path := newPath(t)
	if err := openTest(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	newer := latestVersion() + 1
	rawExec(t, path, "PRAGMA user_version = "+strconv.Itoa(newer))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	_, err = Open(t.Context(), path, Options{})
	assertTooNew(t, err, path, newer)
	assertUntouched(t, path, data)
}

// TestOpenRefusesNewerVersionInWAL covers a newer troupe that crashed after
// migrating: the new version is committed in the WAL while the main file's
// header still shows the old one. The refusal must not checkpoint that WAL
// into the main file.
func TestOpenRefusesNewerVersionInWAL(t *testing.T) {
	src := newPath(t)
	if err := openTest(t, src).Close(); err != nil {
		t.Fatal(err)
	}
	newer := latestVersion() + 1

	// Commit the new version into the WAL and copy the files while the
	// connection is still open: what a SIGKILL leaves behind.
	raw, err := sql.Open("sqlite", src+"?_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("PRAGMA user_version = " + strconv.Itoa(newer)); err != nil {
		t.Fatal(err)
	}
	path := newPath(t)
	main := copyFile(t, src, path)
	wal := copyFile(t, src+"-wal", path+"-wal")
	if len(wal) == 0 {
		t.Fatal("the WAL is empty; the test setup did not leave a commit in it")
	}
	if h, _ := parseHeader(main); h.userVersion != int64(latestVersion()) {
		t.Fatalf("main file header shows version %d, want the old %d", h.userVersion, latestVersion())
	}

	_, err = Open(t.Context(), path, Options{})
	assertTooNew(t, err, path, newer)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, main) {
		t.Error("the refused main file changed")
	}
	if got, _ := os.ReadFile(path + "-wal"); !bytes.Equal(got, wal) {
		t.Error("the refused file's WAL changed")
	}
}

// TestOpenAfterCrashKeepsCommitted opens the files a SIGKILL leaves: the
// main file, and a WAL holding committed transactions, with no -shm.
func TestOpenAfterCrashKeepsCommitted(t *testing.T) {
	src := newPath(t)
	live := openTest(t, src)
	p := troupe.Project{ID: "p1", Path: "/w/one", Name: "one", AddedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := live.Projects().AddProject(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	path := newPath(t)
	copyFile(t, src, path)
	if wal := copyFile(t, src+"-wal", path+"-wal"); len(wal) == 0 {
		t.Fatal("the WAL is empty; the test setup did not leave a commit in it")
	}

	db := openTest(t, path)
	if ps, err := db.Projects().Projects(t.Context()); err != nil || len(ps) != 1 || ps[0] != p {
		t.Errorf("Projects after the crash = %v, %v; want [%v]", ps, err, p)
	}
}

func TestOpenLogsMigration(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db, err := Open(t.Context(), newPath(t), Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, want := range []string{"msg=\"store migrated\" path=", " from=0 to=1 ", "msg=\"store opened\""} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
}

func assertTooNew(t *testing.T, err error, path string, newer int) {
	t.Helper()
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("Open: err = %v, want one matching ErrTooNew", err)
	}
	var te *TooNewError
	if !errors.As(err, &te) || te.Version != int64(newer) || te.Supported != int64(latestVersion()) {
		t.Errorf("err = %#v, want a *TooNewError{Version: %d, Supported: %d}", err, newer, latestVersion())
	}
	want := "open store " + path + ": database schema version " + strconv.Itoa(newer) +
		" is newer than this troupe supports (" + strconv.Itoa(latestVersion()) + "): upgrade troupe or use another --state-dir"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
}

func copyFile(t *testing.T, from, to string) []byte {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	path := filepath.Join(dir, "troupe.db")
	_, err := Open(t.Context(), path, Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want one matching fs.ErrNotExist", err)
	}
	want := "open store " + path + ": directory " + dir + " does not exist: create it or use another --state-dir"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open created the missing directory (stat: %v)", err)
	}
}

func TestOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(t.Context(), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Open(a directory): err = %v, want one saying it is a directory", err)
	}
}

func TestAddProjectNamesCollision(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx := t.Context()
	at := time.Now()
	if err := db.Projects().AddProject(ctx, troupe.Project{ID: "p1", Path: "/w/one", AddedAt: at}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    troupe.Project
		want string
	}{
		{troupe.Project{ID: "p1", Path: "/w/two", AddedAt: at},
			"add project p1: id p1 is registered for /w/one: already exists"},
		{troupe.Project{ID: "p2", Path: "/w/one", AddedAt: at},
			"add project p2: path /w/one is registered as project p1: already exists"},
	} {
		err := db.Projects().AddProject(ctx, tc.p)
		if err == nil || err.Error() != tc.want {
			t.Errorf("AddProject(%v) = %v\nwant %s", tc.p, err, tc.want)
		}
	}
}

func TestAddProjectRefusesInvalid(t *testing.T) {
	db := openTest(t, newPath(t))
	for _, p := range []troupe.Project{
		{ID: "", Path: "/w/a", AddedAt: time.Now()},
		{ID: "p", Path: "", AddedAt: time.Now()},
		{ID: "p", Path: "/w/a"}, // zero time: year 1, outside int64 nanoseconds
		{ID: "p", Path: "/w/a", AddedAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if err := db.Projects().AddProject(t.Context(), p); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("AddProject(%+v): err = %v, want troupe.ErrInvalid", p, err)
		}
	}
}

func TestStoreCanceledContext(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := db.Projects().AddProject(ctx, troupe.Project{ID: "p", Path: "/p", AddedAt: time.Now()}); !errors.Is(err, context.Canceled) {
		t.Errorf("AddProject with a canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := db.Projects().Projects(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Projects with a canceled context: err = %v, want context.Canceled", err)
	}
	if ps, err := db.Projects().Projects(t.Context()); err != nil || len(ps) != 0 {
		t.Errorf("Projects after the canceled add = %v, %v; want none", ps, err)
	}
}

func TestCheck(t *testing.T) {
	db := openTest(t, newPath(t))
	if err := db.Check(t.Context()); err != nil {
		t.Errorf("Check on a new database: %v", err)
	}
}

func BenchmarkOpen(b *testing.B) {
	path := newPath(b)
	db, err := Open(b.Context(), path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Projects().AddProject(b.Context(), troupe.Project{ID: "p", Path: "/p", AddedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		db, err := Open(b.Context(), path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenNew(b *testing.B) {
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		db, err := Open(b.Context(), filepath.Join(dir, strconv.Itoa(i)+".db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddProject(b *testing.B) {
	db := openTest(b, newPath(b))
	at := time.Now()
	i := 0
	for b.Loop() {
		i++
		id := strconv.Itoa(i)
		if err := db.Projects().AddProject(b.Context(), troupe.Project{ID: troupe.ProjectID(id), Path: "/w/" + id, AddedAt: at}); err != nil {
			b.Fatal(err)
		}
	}
}
