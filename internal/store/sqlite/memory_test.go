package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/memory/memorytest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func addProjects(t *testing.T, db *DB, ids ...troupe.ProjectID) {
	t.Helper()
	for _, id := range ids {
		p := troupe.Project{ID: id, Path: "/work/" + string(id), Name: string(id), AddedAt: time.Now()}
		if err := db.Projects().AddProject(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemoryIndexContract(t *testing.T) {
	memorytest.RunIndex(t, func(t *testing.T, projects ...troupe.ProjectID) memory.Index {
		db := openTest(t, newPath(t))
		addProjects(t, db, projects...)
		return db.MemoryIndex()
	})
}

func memorySearch(t *testing.T, idx memory.Index, p troupe.ProjectID, query string) []string {
	t.Helper()
	hits, err := idx.Search(t.Context(), p, query, 10)
	if err != nil {
		t.Fatalf("Search(%q): %v", query, err)
	}
	names := []string{}
	for _, h := range hits {
		names = append(names, h.Note.Name)
	}
	return names
}

func TestMemoryIndexFoldsAccents(t *testing.T) {
	db := openTest(t, newPath(t))
	addProjects(t, db, "p")
	idx := db.MemoryIndex()
	if err := memorytest.Replace(t.Context(), idx, "p", memorytest.Notes("p")); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"vivacite", "VIVACITE", "activite", "jeton d'activité"} {
		if got := memorySearch(t, idx, "p", q); !slices.Equal(got, []string{"sonde-vivacite"}) {
			t.Errorf("Search(%q) = %v, want [sonde-vivacite]", q, got)
		}
	}
}

func TestMemoryIndexNeedsARegisteredProject(t *testing.T) {
	db := openTest(t, newPath(t))
	err := memorytest.Replace(t.Context(), db.MemoryIndex(), "nope", memorytest.Notes("nope"))
	if !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Update of an unregistered project = %v, want not found", err)
	}
	if got := memorySearch(t, db.MemoryIndex(), "nope", "watchdog"); len(got) != 0 {
		t.Errorf("Search of an unregistered project = %v, want nothing", got)
	}
	addProjects(t, db, "p")
	bad := memorytest.Notes("p")
	bad[1].ModTime = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := memorytest.Replace(t.Context(), db.MemoryIndex(), "p", bad); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("Update with a ModTime in 3000 = %v, want invalid", err)
	}
}

// memoryFTSCheck runs FTS5's integrity check, which compares the index with
// the memory_notes rows it indexes.
func memoryFTSCheck(t *testing.T, db *DB) {
	t.Helper()
	if _, err := db.w.ExecContext(t.Context(), `INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("memory_fts integrity check: %v", err)
	}
}

// TestMemoryIndexUpdateInPlace: Update touches only the notes it is given,
// updates rows in place (ids kept) and keeps the FTS index consistent.
func TestMemoryIndexUpdateInPlace(t *testing.T) {
	db := openTest(t, newPath(t))
	addProjects(t, db, "p")
	ctx, idx := t.Context(), db.MemoryIndex()
	ids := func() map[string]int64 {
		rows, err := db.r.QueryContext(ctx, `SELECT name, id FROM memory_notes`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var (
				n  string
				id int64
			)
			if err := rows.Scan(&n, &id); err != nil {
				t.Fatal(err)
			}
			m[n] = id
		}
		return m
	}
	notes := memorytest.Notes("p")
	if err := memorytest.Replace(ctx, idx, "p", notes); err != nil {
		t.Fatal(err)
	}
	before := ids()
	var changes int64
	if err := db.w.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	if err := idx.Update(ctx, "p", nil, nil); err != nil {
		t.Fatal(err)
	}
	var after int64
	if err := db.w.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != changes {
		t.Errorf("an empty Update made %d changes, want none", after-changes)
	}
	notes[0].Body = "rewritten\n"
	notes[0].ModTime = notes[0].ModTime.Add(time.Second)
	if err := idx.Update(ctx, "p", []memory.Entry{{Note: notes[0], Stamp: "new"}}, []string{notes[3].Name}); err != nil {
		t.Fatal(err)
	}
	now := ids()
	if len(now) != 3 || now["cross-talk"] != before["cross-talk"] || now[notes[0].Name] != before[notes[0].Name] {
		t.Errorf("row ids %v after the update, were %v: want rows updated in place and the fourth gone", now, before)
	}
	if got := memorySearch(t, idx, "p", "rewritten"); !slices.Equal(got, []string{notes[0].Name}) {
		t.Errorf("Search(rewritten) = %v", got)
	}
	if got := memorySearch(t, idx, "p", "adapter"); len(got) != 0 {
		t.Errorf("Search(adapter) = %v, want the old body forgotten", got)
	}
	memoryFTSCheck(t, db)
}

func TestMemoryIndexKeepsZeroModTime(t *testing.T) {
	db := openTest(t, newPath(t))
	addProjects(t, db, "p")
	n := memory.Note{Name: "n", Description: "d", Type: "project", Body: "word"}
	if err := db.MemoryIndex().Update(t.Context(), "p", []memory.Entry{{Note: n}}, nil); err != nil {
		t.Fatal(err)
	}
	hits, err := db.MemoryIndex().Search(t.Context(), "p", "word", 1)
	if err != nil || len(hits) != 1 || !hits[0].Note.ModTime.IsZero() {
		t.Errorf("Search = %+v, %v; want one hit with a zero ModTime", hits, err)
	}
}

// TestMemoryIndexGoesWithItsProject: removing a project removes its notes
// from the index, and leaves the index consistent.
func TestMemoryIndexGoesWithItsProject(t *testing.T) {
	db := openTest(t, newPath(t))
	addProjects(t, db, "p1", "p2")
	ctx, idx := t.Context(), db.MemoryIndex()
	for _, p := range []troupe.ProjectID{"p1", "p2"} {
		if err := memorytest.Replace(ctx, idx, p, memorytest.Notes(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Projects().RemoveProject(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM memory_notes WHERE project_id = 'p1'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d rows of the removed project left (%v)", rows, err)
	}
	memoryFTSCheck(t, db)
	if got := memorySearch(t, idx, "p2", "watchdog"); len(got) != 2 {
		t.Errorf("Search in the remaining project = %v, want 2 hits", got)
	}
	// A re-registered id starts empty.
	addProjects(t, db, "p1")
	if got := memorySearch(t, idx, "p1", "watchdog"); len(got) != 0 {
		t.Errorf("Search in the re-registered project = %v, want nothing", got)
	}
}

func TestMemoryIndexSurvivesReopen(t *testing.T) {
	path := newPath(t)
	db, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addProjects(t, db, "p")
	if err := memorytest.Replace(t.Context(), db.MemoryIndex(), "p", memorytest.Notes("p")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, path)
	if got := memorySearch(t, db.MemoryIndex(), "p", "opencode"); !slices.Equal(got, []string{"liveness-probe"}) {
		t.Errorf("Search after reopening = %v", got)
	}
	memoryFTSCheck(t, db)
}

func TestMemoryMatchQuotesTerms(t *testing.T) {
	for query, want := range map[string]string{
		`probe`:                     `"probe"*`,
		`"probe" AND (codex OR x)*`: `"probe"* "codex"* "x"*`,
		`name:liveness -NOT ^a`:     `"name"* "liveness"* "a"*`,
	} {
		if got := memoryMatch(memory.Terms(query)); got != want {
			t.Errorf("memoryMatch(Terms(%q)) = %s, want %s", query, got, want)
		}
	}
}

// TestMemoryStoreOnSQLite runs memory.Store on the FTS5 index, end to end:
// two project folders, one a copy of the other, registered as two projects
// (contract C1).
func TestMemoryStoreOnSQLite(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx := t.Context()
	s := memory.New(memory.Options{Index: db.MemoryIndex()})
	a, b := t.TempDir(), t.TempDir()
	pa := troupe.Project{ID: "pa", Path: a, Name: "a", AddedAt: time.Now()}
	pb := troupe.Project{ID: "pb", Path: b, Name: "b", AddedAt: time.Now()}
	for _, p := range []troupe.Project{pa, pb} {
		if err := db.Projects().AddProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		for _, n := range memorytest.Notes(p.ID) {
			if _, err := s.Write(ctx, p.Path, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Edit the copy by hand.
	edited := memory.Note{Name: "cross-talk", Description: "Edited in the copy", Type: "project", Body: "zebra\n"}
	if err := os.WriteFile(filepath.Join(b, ".troupe", "memory", "cross-talk.md"), memory.Format(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	search := func(p troupe.Project, q string) []memory.Hit {
		t.Helper()
		hits, err := s.Search(ctx, p, q, 10)
		if err != nil {
			t.Fatalf("Search(%s, %q): %v", p.ID, q, err)
		}
		for _, h := range hits {
			if !strings.HasPrefix(h.Note.Path, p.Path+string(filepath.Separator)) {
				t.Errorf("Search(%s, %q) returned %s, a note of another project", p.ID, q, h.Note.Path)
			}
		}
		return hits
	}
	if got := search(pa, "zebra"); len(got) != 0 {
		t.Errorf("Search(pa, zebra) = %v, want nothing: the edit is in the copy", got)
	}
	if got := search(pb, "zebra"); len(got) != 1 || got[0].Note.Description != "Edited in the copy" || got[0].Snippet != "**zebra**" {
		t.Errorf("Search(pb, zebra) = %+v", got)
	}
	if got := search(pa, "watchdog"); len(got) != 2 {
		t.Errorf("Search(pa, watchdog) = %d hits, want 2", len(got))
	}
	if got := search(pb, "watchdog"); len(got) != 1 {
		t.Errorf("Search(pb, watchdog) = %d hits, want 1 (the edit removed one)", len(got))
	}
	for _, q := range []string{`"unbalanced`, `(a AND`, `*`, `NOT`, `name:x`, `NEAR(a b, 2)`} {
		if _, err := s.Search(ctx, pa, q, 10); err != nil {
			t.Errorf("Search(%q): %v", q, err)
		}
	}
}
