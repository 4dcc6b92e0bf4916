// Package sqlite is troupe's durable store: one SQLite database file in the
// daemon's state directory, holding the project registry today and the
// inboxes, requests, tasks and conversations of contract C6 as they arrive.
//
// It is the only package that imports the SQLite driver (modernc.org/sqlite,
// pure Go). Callers see troupe types and the interfaces they define
// (project.Store, inbox.Store, task.Store, memory.Index); no driver type
// appears in an exported signature. Only the wiring package (and tests)
// should import it; everything else depends on the interfaces.
//
// Concurrency: a *DB is safe for concurrent use and owns no goroutines of its
// own. It holds two connection pools to the same file: a writer pool of
// exactly one connection, whose transactions start with BEGIN IMMEDIATE, so
// writes are serialized in the process and never fail with SQLITE_BUSY on a
// lock upgrade; and a read pool of query_only connections, which in WAL mode
// read concurrently with the writer and with each other. Every connection
// gets its pragmas from the DSN (busy_timeout, foreign_keys,
// synchronous=FULL), so a connection the pool reopens is configured like the
// first one.
//
// Open refuses, without writing to it, a file that is not a troupe database
// or that PRAGMA quick_check finds damaged (ErrCorrupt), or whose schema is
// newer than this binary knows (ErrTooNew). Repair exports what a damaged
// file still holds into a fresh one.
//
// The file under a running store: Open records the file's device and inode,
// and every write transaction first stats the path (one stat(2), about a
// microsecond next to a commit's fsync). A file deleted or replaced under
// the store fails that write and every later one with ErrGone, and
// Options.OnGone is told once, so that the daemon stops rather than write
// into a file nobody will ever open again.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Logger receives open and migration events. Nil discards them.
	Logger *slog.Logger
	// OnGone, when set, is called once, from the write that found it, when
	// the database file was deleted or replaced under the store (the
	// error matches ErrGone). It must not block or call the store.
	OnGone func(error)
}

// DB is an open troupe database. Close it when done. Its stores, one per
// domain (Inbox, Journal, Tasks, Projects, Sessions, Chats,
// ClaudeSessions, MemoryIndex), share its connections.
type DB struct{ *conn }

// conn is the database's connections and the file they opened: what every
// store of a DB shares.
type conn struct {
	path string
	log  *slog.Logger
	w    *sql.DB // one connection, BEGIN IMMEDIATE: all writes go here
	r    *sql.DB // query_only pool: all reads outside write transactions

	appends appendQueue // group commit of Append

	// The file Open opened, checked before every write (checkFile).
	abs      string
	dev, ino uint64
	onGone   func(error)
	gone     atomic.Pointer[GoneError] // set once the file is found gone
}

// busyTimeout bounds how long a statement waits for a lock held by another
// process (another troupe on the same state dir, the sqlite3 shell) before
// failing with SQLITE_BUSY. Inside one process the single writer connection
// means writers never wait on each other in SQLite.
const busyTimeout = 5 * time.Second

// Open opens the troupe database at path, creating it (mode 0600) when it
// does not exist, and migrates its schema to the latest version. The parent
// directory must exist.
//
// A file that is not a troupe database fails with an error matching
// ErrCorrupt (a *CorruptError); a database written by a newer troupe fails
// with one matching ErrTooNew (a *TooNewError). In both cases the file is
// left as it was.
//
// Open runs PRAGMA quick_check before it writes anything: a damaged file
// fails with a *DamagedError (it matches ErrCorrupt too) that says how to
// keep a copy and repair it. quick_check reads every page, so its cost
// grows with the file: BenchmarkOpen measures it (see docs/INTERNALS.md, "The store file").
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	db, err := open(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return db, nil
}

func open(ctx context.Context, path string, opts Options) (*DB, error) {
	start := time.Now()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	log = log.With("path", abs)

	if err := prepareFile(abs, path); err != nil {
		return nil, err
	}

	w, err := sql.Open("sqlite", dsn(abs, "rw", connWriter))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	version, err := checkContents(ctx, w, path)
	if err == nil {
		err = quickCheck(ctx, w, abs)
	}
	if err == nil {
		err = setWAL(ctx, w)
	}
	if err == nil {
		err = migrate(ctx, w, version, path, log)
	}
	if err != nil {
		return nil, errors.Join(err, w.Close())
	}

	r, err := sql.Open("sqlite", dsn(abs, "rw", connReader))
	if err == nil {
		n := max(4, runtime.GOMAXPROCS(0))
		r.SetMaxOpenConns(n)
		r.SetMaxIdleConns(n)
		r.SetConnMaxLifetime(0)
		r.SetConnMaxIdleTime(0)
		err = r.PingContext(ctx)
		if err != nil {
			err = errors.Join(err, r.Close())
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open read pool: %w", err), w.Close())
	}

	fi, err := os.Stat(abs)
	if err != nil {
		return nil, errors.Join(err, r.Close(), w.Close())
	}
	dev, ino := fileID(fi)
	log.Debug("store opened", "schema_version", latestVersion(), "took", time.Since(start))
	return &DB{&conn{path: path, log: log, w: w, r: r, abs: abs, dev: dev, ino: ino, onGone: opts.OnGone}}, nil
}

// fileID returns the device and inode of a file.
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// checkFile fails with a *GoneError when the file at the store's path is
// not the one Open opened: deleted, or replaced by another file. Writes
// call it first; once it failed it keeps failing. A stat that fails for
// another reason (EACCES, EIO) says nothing about the file and lets the
// write try.
func (db *conn) checkFile() error {
	if g := db.gone.Load(); g != nil {
		return g
	}
	fi, err := os.Stat(db.abs)
	var reason string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		reason = "the file was deleted"
	case err != nil:
		return nil
	default:
		if dev, ino := fileID(fi); dev != db.dev || ino != db.ino {
			reason = fmt.Sprintf("the path now holds another file: inode %d, was %d", ino, db.ino)
		}
	}
	if reason == "" {
		return nil
	}
	g := &GoneError{Path: db.abs, Reason: reason}
	if db.gone.CompareAndSwap(nil, g) {
		db.log.Error("database file gone: refusing every write", "reason", reason)
		if db.onGone != nil {
			db.onGone(g)
		}
	}
	return db.gone.Load()
}

// Close closes both pools. The read pool closes first so that the writer is
// the last connection: SQLite then checkpoints the WAL into the main file and
// removes the -wal and -shm files.
//
// When the file was found gone, SQLite leaves the -wal and -shm files of
// the deleted database behind; Close removes them, so that they are never
// replayed into whatever file the next start finds or creates at the path.
func (db *DB) Close() error {
	err := errors.Join(db.r.Close(), db.w.Close())
	if db.gone.Load() != nil {
		for _, suffix := range []string{"-wal", "-shm"} {
			if rerr := os.Remove(db.abs + suffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", db.path, err)
	}
	return nil
}

// Check runs PRAGMA integrity_check over the whole file: quick_check's
// checks (which Open runs) and also that every index matches its table. It
// costs more than quick_check; it is meant for a doctor command. A damaged
// file fails with a *DamagedError.
func (db *DB) Check(ctx context.Context) error {
	if err := runCheck(ctx, db.r, "integrity_check", db.abs); err != nil {
		return fmt.Errorf("check store %s: %w", db.path, err)
	}
	return nil
}

// quickCheck runs PRAGMA quick_check on w.
func quickCheck(ctx context.Context, w *sql.DB, abs string) error {
	return runCheck(ctx, w, "quick_check", abs)
}

// runCheck runs PRAGMA pragma (quick_check or integrity_check) and turns
// what it finds into a *DamagedError.
func runCheck(ctx context.Context, db *sql.DB, pragma, abs string) error {
	rows, err := db.QueryContext(ctx, "PRAGMA "+pragma)
	if err != nil {
		return damaged(err, pragma, abs)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return damaged(err, pragma, abs)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return damaged(err, pragma, abs)
	}
	if len(problems) > 0 {
		reason := problems[0]
		if len(problems) > 1 {
			reason = fmt.Sprintf("%s, and %d more problems", reason, len(problems)-1)
		}
		return &DamagedError{Path: abs, Check: pragma, Problem: reason}
	}
	return nil
}

// damaged turns a SQLite corruption error met while checking into a
// *DamagedError; other errors pass through.
func damaged(err error, pragma, abs string) error {
	if ce := asCorrupt(err, abs); ce != nil {
		return &DamagedError{Path: abs, Check: pragma, Problem: ce.Reason}
	}
	return fmt.Errorf("run %s: %w", pragma, err)
}

type connKind int

const (
	connWriter connKind = iota
	connReader
	connProbe
)

// dsn builds a "file:" URI for path. The URI form lets SQLite honour mode=
// (mode=rw never creates a file: prepareFile does, with 0600) and escapes
// characters such as '?' and '#' in the path. The driver reads the
// underscore parameters from the query; SQLite ignores them.
func dsn(path, mode string, kind connKind) string {
	q := url.Values{}
	q.Set("mode", mode)
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	switch kind {
	case connWriter:
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	case connReader:
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "query_only(1)")
	case connProbe:
		// Read-only file handle, no pragma that could write.
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// prepareFile makes sure abs is either a new empty file created with mode
// 0600 or an existing file that looks like a troupe database, refusing
// anything else before SQLite ever opens it. name is the path as the caller
// wrote it, for messages.
func prepareFile(abs, name string) error {
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A WAL without its database (the file deleted under a daemon
		// that was then killed) would be replayed into the new file.
		if wi, err := os.Stat(abs + "-wal"); err == nil && wi.Size() > 0 {
			return fmt.Errorf("%s-wal exists without %s: it belongs to a database that is gone; move it aside (mv %s-wal %s-wal.old) and start again",
				abs, name, abs, abs)
		}
		return createFile(abs)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory: give the path of a database file", name)
	}

	if fi.Size() > 0 {
		if err := checkHeaderFile(abs, name); err != nil {
			return err
		}
	}
	// A non-empty WAL left by a crash holds committed transactions that the
	// main file's header does not show yet, user_version included. Read the
	// real version through a read-only connection: unlike the writer, it
	// cannot checkpoint the WAL into the main file when it closes.
	if wi, err := os.Stat(abs + "-wal"); err == nil && wi.Size() > 0 {
		return probe(abs, name)
	}
	return nil
}

// missingDirError reports that the directory meant to hold the database does
// not exist. It matches fs.ErrNotExist.
type missingDirError struct {
	dir string
	err error
}

func (e *missingDirError) Error() string {
	return fmt.Sprintf("directory %s does not exist: create it or use another --state-dir", e.dir)
}

func (e *missingDirError) Unwrap() error { return e.err }

func createFile(abs string) error {
	dir := filepath.Dir(abs)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &missingDirError{dir: dir, err: err}
		}
		return err
	}
	// An empty file is a valid, empty SQLite database. Creating it here,
	// rather than letting SQLite create it, sets its mode; SQLite gives the
	// -wal and -shm files the main file's mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil // created concurrently; checked like any existing file below
	}
	if err != nil {
		return err
	}
	return f.Close()
}

func checkHeaderFile(abs, name string) error {
	f, err := os.Open(abs)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, headerSize)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	h, reason := parseHeader(buf[:n])
	if reason != "" {
		return &CorruptError{Path: name, Reason: reason}
	}
	return classify(name, h.applicationID, h.userVersion, 0)
}

// probe reads the application id and schema version through a read-only
// connection. SQLite may create empty -wal/-shm files for it; it never
// writes the main file.
func probe(abs, name string) error {
	db, err := sql.Open("sqlite", dsn(abs, "ro", connProbe))
	if err != nil {
		return err
	}
	defer db.Close()
	var appID, version int64
	row := db.QueryRow("SELECT application_id, user_version FROM pragma_application_id, pragma_user_version")
	if err := row.Scan(&appID, &version); err != nil {
		if ce := asCorrupt(err, name); ce != nil {
			return ce
		}
		return fmt.Errorf("probe database: %w", err)
	}
	return classify(name, appID, version, 0)
}

// checkContents asks SQLite itself what the file holds, through the writer
// connection, before anything is written: the header check cannot see a
// damaged schema page or a file cut short. It returns the schema version.
func checkContents(ctx context.Context, w *sql.DB, name string) (int64, error) {
	var appID, version, objects int64
	row := w.QueryRowContext(ctx, `SELECT application_id, user_version,
		(SELECT count(*) FROM sqlite_schema) FROM pragma_application_id, pragma_user_version`)
	if err := row.Scan(&appID, &version, &objects); err != nil {
		if ce := asCorrupt(err, name); ce != nil {
			return 0, ce
		}
		return 0, fmt.Errorf("read database header: %w", err)
	}
	if err := classify(name, appID, version, objects); err != nil {
		return 0, err
	}
	return version, nil
}

// setWAL switches the file to WAL mode. journal_mode is a property of the
// file, not of a connection, so it is set once here, after the checks,
// rather than in the DSN where it would run before them and rewrite the
// header of a file Open is about to refuse.
func setWAL(ctx context.Context, w *sql.DB) error {
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("set journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("set journal mode: got %q, want wal", mode)
	}
	return nil
}

// asCorrupt turns SQLite's "not a database" and "malformed" errors into a
// *CorruptError naming path. It returns nil for any other error.
func asCorrupt(err error, path string) *CorruptError {
	var se *sqlitedrv.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return &CorruptError{Path: path, Reason: se.Error()}
		}
	}
	return nil
}
