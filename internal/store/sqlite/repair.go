package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RepairReport says what Repair saved.
type RepairReport struct {
	Path    string        `json:"path"`    // the fresh database, where the damaged one was
	Damaged string        `json:"damaged"` // where the damaged file was moved
	Version int64         `json:"version"` // the damaged file's schema version (the fresh one is then migrated to the latest)
	Tables  []TableReport `json:"tables"`
}

// TableReport is what Repair saved of one table.
type TableReport struct {
	Table string `json:"table"`
	Kept  int64  `json:"kept"` // rows copied into the fresh database
	// Lost counts the rows that could not be read or written: for a table
	// keyed by rowid, the width of the rowid ranges skipped over damaged
	// pages (exact where ids are dense, as in messages; at most that
	// otherwise); for other tables, the rows whose copy failed only.
	Lost int64 `json:"lost"`
	// Orphans are rows copied, then dropped because the row they refer to
	// was lost (a request whose message is gone).
	Orphans int64 `json:"orphans"`
	// Unreadable counts the damaged spans skipped.
	Unreadable int `json:"unreadable_spans"`
	// RestLost: the table could not be read past its last unreadable span;
	// how many rows were there is unknown.
	RestLost bool `json:"rest_lost"`
}

// Repair exports what is readable of the damaged troupe database at path
// into a fresh one at the same path. It creates a fresh database (beside
// it, <path>.repair) with the damaged file's schema version, copies each
// table row by row, skipping the rows and pages it cannot read and
// counting them, drops the rows whose parent was lost, migrates the fresh
// file to the latest schema and checks it (integrity_check); then it
// moves the damaged file (and its -wal and -shm files) aside to
// <path>.damaged-<time> and puts the fresh one in its place. When it fails
// before that, nothing has changed. The caller must make sure no daemon uses
// the file (the daemon package holds the state dir's lock for it).
//
// The FTS5 index of memory notes is rebuilt from the copied notes, not
// copied. A file whose header or schema cannot be read holds nothing
// Repair can export: it fails and leaves the file where it was.
func Repair(ctx context.Context, path string, opts Options) (*RepairReport, error) {
	rep, err := repair(ctx, path, opts)
	if err != nil {
		return rep, fmt.Errorf("repair store %s: %w", path, err)
	}
	return rep, nil
}

func repair(ctx context.Context, path string, opts Options) (*RepairReport, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, err
	}
	version, err := damagedVersion(abs)
	if err != nil {
		return nil, err
	}

	rep := &RepairReport{Path: abs, Version: version,
		Damaged: abs + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")}
	// The fresh database is built beside the damaged one and takes its
	// place only once complete and checked: a repair that fails leaves
	// everything as it was.
	tmp := abs + ".repair"
	removeDB(tmp)
	if err := build(ctx, abs, tmp, version, rep, log); err != nil {
		removeDB(tmp)
		rep.Damaged = ""
		return rep, err
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(abs+suffix, rep.Damaged+suffix)
		if err != nil && !(suffix != "" && errors.Is(err, fs.ErrNotExist)) {
			return rep, fmt.Errorf("move damaged file aside: %w (the fresh database is %s)", err, tmp)
		}
	}
	log.Info("damaged database moved aside", "to", rep.Damaged)
	if err := os.Rename(tmp, abs); err != nil {
		return rep, fmt.Errorf("put the fresh database in place: %w (it is %s)", err, tmp)
	}
	return rep, nil
}

// removeDB removes a database file and its -wal and -shm files.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// build creates a fresh database at dst with schema version, copies into
// it what is readable of src, migrates it to the latest schema and checks
// it.
func build(ctx context.Context, src, dst string, version int64, rep *RepairReport, log *slog.Logger) error {
	old, err := sql.Open("sqlite", dsn(src, "ro", connProbe))
	if err != nil {
		return err
	}
	defer old.Close()
	old.SetMaxOpenConns(1)

	if err := createFile(dst); err != nil {
		return fmt.Errorf("create fresh database: %w", err)
	}
	w, err := sql.Open("sqlite", dsn(dst, "rw", connWriter))
	if err != nil {
		return err
	}
	w.SetMaxOpenConns(1)
	err = setWAL(ctx, w)
	if err == nil {
		err = migrateTo(ctx, w, 0, version, dst, log)
	}
	if err == nil {
		rep.Tables, err = copyTables(ctx, old, w, log)
	}
	if err := errors.Join(err, w.Close()); err != nil {
		return err
	}

	// Now the latest schema, and the checks every start runs, and more.
	db, err := Open(ctx, dst, Options{Logger: log})
	if err != nil {
		return err
	}
	if err := db.Check(ctx); err != nil {
		return errors.Join(err, db.Close())
	}
	return db.Close()
}

// damagedVersion reads the schema version of the damaged file, which must
// be a troupe database this binary knows.
func damagedVersion(abs string) (int64, error) {
	db, err := sql.Open("sqlite", dsn(abs, "ro", connProbe))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var appID, version int64
	err = db.QueryRow("SELECT application_id, user_version FROM pragma_application_id, pragma_user_version").Scan(&appID, &version)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w: nothing can be exported from this file", err)
	}
	if appID != applicationID {
		return 0, &CorruptError{Path: abs, Reason: "no troupe application id"}
	}
	return version, classify(abs, appID, version, 0)
}

// table is one table of the schema to copy.
type table struct {
	name    string
	cols    []string // every column, in order
	keys    []string // the scan order: rowid, or the primary key of a WITHOUT ROWID table
	integer bool     // keys[0] holds integers, so damaged spans can be skipped
}

// copyTables copies every table of the fresh schema from old into w, in
// one transaction with foreign keys off, then drops the orphans.
func copyTables(ctx context.Context, old, w *sql.DB, log *slog.Logger) ([]TableReport, error) {
	conn, err := w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tables, err := schemaTables(ctx, conn)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return nil, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // no-op after Commit

	reps := make([]TableReport, len(tables))
	for i, t := range tables {
		reps[i], err = copyTable(ctx, old, tx, t)
		if err != nil {
			return nil, fmt.Errorf("copy table %s: %w", t.name, err)
		}
		log.Info("table copied", "table", t.name, "kept", reps[i].Kept, "lost", reps[i].Lost, "unreadable_spans", reps[i].Unreadable)
	}
	if err := copySequences(ctx, old, tx); err != nil {
		return nil, err
	}
	if err := dropOrphans(ctx, tx, tables, reps); err != nil {
		return nil, err
	}
	return reps, tx.Commit()
}

// schemaTables lists the ordinary tables of the schema on conn: not
// SQLite's own, not virtual tables (the FTS5 index is rebuilt by its
// triggers as its content table is copied) nor their shadow tables.
func schemaTables(ctx context.Context, conn *sql.Conn) ([]table, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE type = 'table' ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	type entry struct{ name, sql string }
	var all []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.name, &e.sql); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var virtual []string
	for _, e := range all {
		if strings.HasPrefix(strings.ToUpper(e.sql), "CREATE VIRTUAL TABLE") {
			virtual = append(virtual, e.name+"_")
		}
	}
	var tables []table
	for _, e := range all {
		if strings.HasPrefix(e.name, "sqlite_") || strings.HasPrefix(strings.ToUpper(e.sql), "CREATE VIRTUAL TABLE") ||
			hasAnyPrefix(e.name, virtual) {
			continue
		}
		t := table{name: e.name, keys: []string{"rowid"}, integer: true}
		withoutRowid := strings.Contains(strings.ToUpper(e.sql), "WITHOUT ROWID")
		cols, err := conn.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid`, e.name)
		if err != nil {
			return nil, err
		}
		var pk []string
		var firstPKType string
		for cols.Next() {
			var name, typ string
			var n int
			if err := cols.Scan(&name, &typ, &n); err != nil {
				cols.Close()
				return nil, err
			}
			t.cols = append(t.cols, name)
			if n > 0 {
				pk = append(pk, name) // in cid order; the pk order is n
				if n == 1 {
					firstPKType = typ
				}
			}
		}
		cols.Close()
		if err := cols.Err(); err != nil {
			return nil, err
		}
		if withoutRowid {
			t.keys, t.integer = pkOrder(ctx, conn, e.name, pk), strings.EqualFold(firstPKType, "INTEGER")
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// pkOrder returns the primary key columns of table in key order.
func pkOrder(ctx context.Context, conn *sql.Conn, table string, fallback []string) []string {
	rows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk`, table)
	if err != nil {
		return fallback
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if rows.Scan(&k) != nil {
			return fallback
		}
		keys = append(keys, k)
	}
	if rows.Err() != nil || len(keys) == 0 {
		return fallback
	}
	return keys
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}

// copyTable copies t row by row, in key order. When a read fails (a
// damaged page or row), it looks for the next readable key past it and goes
// on from there.
func copyTable(ctx context.Context, old *sql.DB, tx *sql.Tx, t table) (TableReport, error) {
	rep := TableReport{Table: t.name}
	keyList := quoteAll(t.keys)
	sel := "SELECT " + keyList + ", " + quoteAll(t.cols) + " FROM " + quote(t.name)
	ins, err := tx.PrepareContext(ctx, "INSERT INTO "+quote(t.name)+" ("+quoteAll(t.cols)+") VALUES (?"+
		strings.Repeat(", ?", len(t.cols)-1)+")")
	if err != nil {
		return rep, err
	}
	defer ins.Close()

	var cursor []any // keys of the last row read; nil before the first
	op := ">"        // ">=" after a skip: cursor is then the first key to read
	for {
		query, args := sel, cursor
		if cursor != nil {
			query += " WHERE (" + keyList + ") " + op + " (?" + strings.Repeat(", ?", len(t.keys)-1) + ")"
		}
		query += " ORDER BY " + keyList
		err := func() error {
			rows, err := old.QueryContext(ctx, query, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				vals := make([]any, len(t.keys)+len(t.cols))
				ptrs := make([]any, len(vals))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return err
				}
				cursor, op = vals[:len(t.keys)], ">"
				if _, err := ins.ExecContext(ctx, vals[len(t.keys):]...); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					rep.Lost++ // a row the fresh schema refuses
					continue
				}
				rep.Kept++
			}
			return rows.Err()
		}()
		if err == nil {
			return rep, nil
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if asCorrupt(err, "") == nil {
			return rep, err
		}
		rep.Unreadable++
		next, skipped, ok := skipDamage(ctx, old, t, sel, cursor)
		if !ok {
			rep.RestLost = true
			return rep, nil
		}
		if t.keys[0] == "rowid" {
			rep.Lost += skipped
		}
		cursor, op = []any{next}, ">="
		if len(t.keys) > 1 {
			// Resume at the first row whose first key is next.
			cursor = append(cursor, make([]any, len(t.keys)-1)...)
			for i := 1; i < len(cursor); i++ {
				cursor[i] = math.MinInt64 // SQLite sorts every integer, real, text and blob above it
			}
		}
	}
}

// skipDamage finds the smallest first key past the damaged span after
// cursor from which rows can be read again: it probes forward in doubling
// steps, then narrows down by bisection. It returns that key and the
// width of the skipped span, or ok false when nothing past the damage can
// be read (or the keys are not integers).
func skipDamage(ctx context.Context, old *sql.DB, t table, sel string, cursor []any) (next, skipped int64, ok bool) {
	if !t.integer {
		return 0, 0, false
	}
	from := int64(0) // rowids and our integer keys start at 1
	if cursor != nil {
		k, isInt := cursor[0].(int64)
		if !isInt {
			return 0, 0, false
		}
		from = k
	}
	// readable reports whether the first row at or after key k (first key
	// column) reads, and whether there is one.
	probe := sel + " WHERE " + quote(t.keys[0]) + " >= ? ORDER BY " + quoteAll(t.keys) + " LIMIT 1"
	readable := func(k int64) (readOK, found bool, first int64) {
		rows, err := old.QueryContext(ctx, probe, k)
		if err != nil {
			return false, false, 0
		}
		defer rows.Close()
		if !rows.Next() {
			return rows.Err() == nil, false, 0
		}
		vals := make([]any, len(t.keys)+len(t.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if rows.Scan(ptrs...) != nil {
			return false, false, 0
		}
		first, _ = vals[0].(int64)
		return true, true, first
	}
	// A row with key from may itself be the unreadable one (a damaged
	// record on a readable page): start probing at from+1.
	lo, step := from, int64(1)
	var hi int64
	for {
		if ctx.Err() != nil || lo > math.MaxInt64-step {
			return 0, 0, false
		}
		hi = lo + step
		if okRead, _, _ := readable(hi); okRead {
			break
		}
		lo, step = hi, step*2
	}
	for hi-lo > 1 { // readable(hi), not readable(lo) (or lo == from)
		mid := lo + (hi-lo)/2
		if okRead, _, _ := readable(mid); okRead {
			hi = mid
		} else {
			lo = mid
		}
	}
	_, found, first := readable(hi)
	if !found {
		return 0, 0, false // nothing past the damage: how much was lost is unknown
	}
	return first, max(0, first-from-1), true
}

// copySequences carries the AUTOINCREMENT counters over, so that no id is
// ever reused, even the ids of rows lost.
func copySequences(ctx context.Context, old *sql.DB, tx *sql.Tx) error {
	rows, err := old.QueryContext(ctx, "SELECT name, seq FROM sqlite_sequence")
	if err != nil {
		return nil // unreadable: the copied rows' ids set the counters
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var seq int64
		if rows.Scan(&name, &seq) != nil {
			return nil
		}
		res, err := tx.ExecContext(ctx, "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", seq, name)
		if err != nil {
			return fmt.Errorf("copy sequence of %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if _, err := tx.ExecContext(ctx, "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", name, seq); err != nil {
				return fmt.Errorf("copy sequence of %s: %w", name, err)
			}
		}
	}
	return nil
}

// dropOrphans deletes the copied rows whose foreign key names a row that
// was lost, counting them per table, until none is left.
func dropOrphans(ctx context.Context, tx *sql.Tx, tables []table, reps []TableReport) error {
	for {
		var dropped int64
		for i, t := range tables {
			fks, err := tx.QueryContext(ctx, `SELECT "table", "from", "to" FROM pragma_foreign_key_list(?)`, t.name)
			if err != nil {
				return fmt.Errorf("list foreign keys of %s: %w", t.name, err)
			}
			type fk struct {
				parent, from string
				to           sql.NullString
			}
			var list []fk
			for fks.Next() {
				var f fk
				if err := fks.Scan(&f.parent, &f.from, &f.to); err != nil {
					fks.Close()
					return err
				}
				list = append(list, f)
			}
			fks.Close()
			for _, f := range list {
				to := "rowid"
				if f.to.Valid && f.to.String != "" {
					to = f.to.String
				}
				res, err := tx.ExecContext(ctx, "DELETE FROM "+quote(t.name)+" WHERE "+quote(f.from)+" IS NOT NULL AND "+
					quote(f.from)+" NOT IN (SELECT "+quote(to)+" FROM "+quote(f.parent)+")")
				if err != nil {
					return fmt.Errorf("drop orphans of %s: %w", t.name, err)
				}
				n, _ := res.RowsAffected()
				reps[i].Orphans += n
				reps[i].Kept -= n
				dropped += n
			}
		}
		if dropped == 0 {
			return nil
		}
	}
}
