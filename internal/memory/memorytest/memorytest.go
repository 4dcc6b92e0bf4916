// Package memorytest is the contract suite every memory.Index must pass:
// matching by words of the name, description and body, ranking, limits,
// Update (drop, add, replace) and Entries (stamps kept, no bodies),
// queries that are not valid FTS syntax, and project isolation (contract
// C1). memory's tests run it against MemIndex, the
// SQLite store's tests against the FTS5 index.
//
// It is imported by tests only. RunIndex runs its cases in parallel
// subtests, each with a fresh index.
package memorytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// NewIndex returns an empty index in which projects exist (a store may need
// them registered first).
type NewIndex func(t *testing.T, projects ...troupe.ProjectID) memory.Index

// Projects used by the suite.
const (
	P1 troupe.ProjectID = "p1"
	P2 troupe.ProjectID = "p2"
	P3 troupe.ProjectID = "p3" // exists, never synced
)

var modTime = time.Date(2026, 6, 11, 9, 30, 0, 123456789, time.UTC)

func note(project troupe.ProjectID, name, description, body string) memory.Note {
	return memory.Note{
		Name: name, Description: description, Type: "project", Body: body,
		Path:    fmt.Sprintf("/work/%s/.troupe/memory/%s.md", project, name),
		ModTime: modTime,
	}
}

// Notes is the suite's base set of notes of project.
func Notes(project troupe.ProjectID) []memory.Note {
	return []memory.Note{
		note(project, "liveness-probe", "Activity token per session so asks survive long turns",
			"# Liveness\n\nThe watchdog re-arms whenever the adapter emits output.\n"+
				"Codex and OpenCode targets were cut with a false no reply.\n"),
		note(project, "cross-talk", "Runtime registries keyed by agent id alone mixed two projects",
			"Key every inbox, session and lock by project and agent.\nThe watchdog was fine.\n"),
		note(project, "resume-policy", "Never resume a live Claude session",
			"Fork it instead. The registry file names the pid and its start time.\n"),
		note(project, "sonde-vivacite", "Sonde de vivacité du rendez-vous",
			"La vivacité se lit dans le jeton d'activité.\n"),
	}
}

// RunIndex runs the contract suite against the indexes newIndex returns.
func RunIndex(t *testing.T, newIndex NewIndex) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, newIndex NewIndex)
	}{
		{"FindsByNameDescriptionAndBody", testFinds},
		{"HitFields", testHitFields},
		{"Ranks", testRanks},
		{"Limit", testLimit},
		{"SyncReplaces", testSyncReplaces},
		{"UpdateAndEntries", testUpdateAndEntries},
		{"AnyQueryIsValid", testAnyQuery},
		{"C1ProjectIsolation", testIsolation},
		{"Concurrent", testConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newIndex)
		})
	}
}

// Replace makes idx hold exactly notes for project, through Entries and
// Update: each note gets the stamp "s-<name>".
func Replace(ctx context.Context, idx memory.Index, project troupe.ProjectID, notes []memory.Note) error {
	have, err := idx.Entries(ctx, project)
	if err != nil {
		return err
	}
	var drop []string
	for _, e := range have {
		if !slices.ContainsFunc(notes, func(n memory.Note) bool { return n.Name == e.Name }) {
			drop = append(drop, e.Name)
		}
	}
	put := make([]memory.Entry, 0, len(notes))
	for _, n := range notes {
		put = append(put, memory.Entry{Note: n, Stamp: "s-" + n.Name})
	}
	return idx.Update(ctx, project, put, drop)
}

func doSync(t *testing.T, idx memory.Index, project troupe.ProjectID, notes []memory.Note) {
	t.Helper()
	if err := Replace(t.Context(), idx, project, notes); err != nil {
		t.Fatalf("Replace(%s): %v", project, err)
	}
}

func search(t *testing.T, idx memory.Index, project troupe.ProjectID, query string, limit int) []memory.Hit {
	t.Helper()
	hits, err := idx.Search(t.Context(), project, query, limit)
	if err != nil {
		t.Fatalf("Search(%s, %q): %v", project, query, err)
	}
	return hits
}

func names(hits []memory.Hit) []string {
	ns := []string{}
	for _, h := range hits {
		ns = append(ns, h.Note.Name)
	}
	return ns
}

func sorted(ss []string) []string { return slices.Sorted(slices.Values(ss)) }

func testFinds(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1)
	doSync(t, idx, P1, Notes(P1))
	for _, tc := range []struct {
		query string
		want  []string // in any order
	}{
		{"opencode", []string{"liveness-probe"}},               // body
		{"registries", []string{"cross-talk"}},                 // description
		{"policy", []string{"resume-policy"}},                  // name
		{"watchdog", []string{"cross-talk", "liveness-probe"}}, // two bodies
		{"Watchdog CODEX", []string{"liveness-probe"}},         // every term, any case
		{"live", []string{"liveness-probe", "resume-policy"}},  // a prefix of a word
		{"vivacité", []string{"sonde-vivacite"}},               // non-ASCII words
		{"VIVACITÉ jeton", []string{"sonde-vivacite"}},
		{"ness", nil}, // inside a word, not its start
		{"watchdog nothing", nil},
		{"zebra", nil},
	} {
		got := names(search(t, idx, P1, tc.query, 10))
		if want := sorted(append([]string{}, tc.want...)); !slices.Equal(sorted(got), want) {
			t.Errorf("Search(%q) = %v, want %v", tc.query, got, want)
		}
	}
}

func testHitFields(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1)
	notes := Notes(P1)
	doSync(t, idx, P1, notes)
	hits := search(t, idx, P1, "opencode", 10)
	if len(hits) != 1 {
		t.Fatalf("Search(opencode) = %v, want liveness-probe", names(hits))
	}
	h, want := hits[0], notes[0]
	want.Body = ""
	if h.Note.Name != want.Name || h.Note.Description != want.Description || h.Note.Type != want.Type ||
		h.Note.Path != want.Path || !h.Note.ModTime.Equal(want.ModTime) || h.Note.Body != "" {
		t.Errorf("hit note = %+v, want %+v", h.Note, want)
	}
	if !strings.Contains(h.Snippet, "**OpenCode**") {
		t.Errorf("snippet = %q, want the match in bold: **OpenCode**", h.Snippet)
	}
	if strings.Contains(h.Snippet, "\n") {
		t.Errorf("snippet = %q, want one line", h.Snippet)
	}
}

func testRanks(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1)
	filler := strings.Repeat("Other words about sessions, inboxes and tasks. ", 20)
	doSync(t, idx, P1, []memory.Note{
		note(P1, "aside", "Mentions it once", filler+"The watchdog appears here once. "+filler),
		note(P1, "watchdog-window", "How the watchdog window re-arms", "The watchdog re-arms. The watchdog cuts.\n"),
		note(P1, "unrelated", "Nothing to see", filler),
	})
	hits := search(t, idx, P1, "watchdog", 10)
	if got := names(hits); !slices.Equal(got, []string{"watchdog-window", "aside"}) {
		t.Fatalf("Search(watchdog) = %v, want [watchdog-window aside]: name, description and body before one mention", got)
	}
	if !(hits[0].Rank > hits[1].Rank) {
		t.Errorf("ranks = %v, %v, want the first higher", hits[0].Rank, hits[1].Rank)
	}
}

func testLimit(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1)
	var notes []memory.Note
	for i := range 15 {
		notes = append(notes, note(P1, fmt.Sprintf("note-%02d", i), "Shared word", "common body"))
	}
	doSync(t, idx, P1, notes)
	for _, tc := range []struct{ limit, want int }{{1, 1}, {5, 5}, {0, memory.DefaultSearchLimit}, {-1, memory.DefaultSearchLimit}, {40, 15}} {
		if got := len(search(t, idx, P1, "common", tc.limit)); got != tc.want {
			t.Errorf("Search(limit %d) gave %d hits, want %d", tc.limit, got, tc.want)
		}
	}
	// Equal ranks come in name order.
	if got := names(search(t, idx, P1, "common", 3)); !slices.Equal(got, []string{"note-00", "note-01", "note-02"}) {
		t.Errorf("Search(limit 3) = %v, want the first three names", got)
	}
}

func testSyncReplaces(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1)
	doSync(t, idx, P1, []memory.Note{
		note(P1, "kept", "Kept note", "old words here"),
		note(P1, "dropped", "Dropped note", "old words too"),
	})
	doSync(t, idx, P1, []memory.Note{
		note(P1, "kept", "Kept note", "new words here"),
		note(P1, "added", "Added note", "new words too"),
	})
	for query, want := range map[string][]string{
		"old":     {},
		"new":     {"added", "kept"},
		"dropped": {},
		"note":    {"added", "kept"},
	} {
		if got := sorted(names(search(t, idx, P1, query, 10))); !slices.Equal(got, want) {
			t.Errorf("after the second Sync, Search(%q) = %v, want %v", query, got, want)
		}
	}
	doSync(t, idx, P1, nil)
	if got := names(search(t, idx, P1, "note", 10)); len(got) != 0 {
		t.Errorf("after Sync(nil), Search(note) = %v, want nothing", got)
	}
}

// testUpdateAndEntries: Update drops, then adds or replaces; Entries gives
// back every field but the body, with the stamps, in name order, of its
// project only.
func testUpdateAndEntries(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1, P2, P3)
	ctx := t.Context()
	ns := Notes(P1)
	put := func(p troupe.ProjectID, es []memory.Entry, drop ...string) {
		t.Helper()
		if err := idx.Update(ctx, p, es, drop); err != nil {
			t.Fatalf("Update(%s): %v", p, err)
		}
	}
	entries := func(p troupe.ProjectID) []memory.Entry {
		t.Helper()
		es, err := idx.Entries(ctx, p)
		if err != nil {
			t.Fatalf("Entries(%s): %v", p, err)
		}
		return es
	}
	put(P1, []memory.Entry{{Note: ns[0], Stamp: "10:1:2:644"}, {Note: ns[1], Stamp: "20:1:3:644"}})
	put(P2, []memory.Entry{{Note: Notes(P2)[2], Stamp: "other"}})
	put(P1, []memory.Entry{{Note: ns[2], Stamp: "30:1:4:644"}}, "no-such-note")

	es := entries(P1)
	var got []string
	for _, e := range es {
		got = append(got, e.Name+"="+e.Stamp)
		if e.Body != "" {
			t.Errorf("Entries gave %s with its body", e.Name)
		}
	}
	want := []string{"cross-talk=20:1:3:644", "liveness-probe=10:1:2:644", "resume-policy=30:1:4:644"}
	if !slices.Equal(got, want) {
		t.Fatalf("Entries(p1) = %v, want %v in name order", got, want)
	}
	w := ns[1]
	if e := es[0]; e.Description != w.Description || e.Type != w.Type || e.Path != w.Path || !e.ModTime.Equal(w.ModTime) {
		t.Errorf("entry = %+v, want the fields of %+v", e.Note, w)
	}
	if len(entries(P3)) != 0 {
		t.Errorf("Entries of a project never updated = %v, want none", entries(P3))
	}

	// Drop one, replace one (new body and stamp), in one Update.
	changed := ns[0]
	changed.Body = "rewritten with zanzibar\n"
	put(P1, []memory.Entry{{Note: changed, Stamp: "11:2:2:644"}}, "cross-talk")
	got = nil
	for _, e := range entries(P1) {
		got = append(got, e.Name+"="+e.Stamp)
	}
	if want := []string{"liveness-probe=11:2:2:644", "resume-policy=30:1:4:644"}; !slices.Equal(got, want) {
		t.Errorf("after the second Update, Entries = %v, want %v", got, want)
	}
	if got := names(search(t, idx, P1, "zanzibar", 10)); !slices.Equal(got, []string{"liveness-probe"}) {
		t.Errorf("Search(zanzibar) = %v, want the new body found", got)
	}
	if got := names(search(t, idx, P1, "opencode", 10)); len(got) != 0 {
		t.Errorf("Search(opencode) = %v, want the old body forgotten", got)
	}
	if got := names(search(t, idx, P1, "registries", 10)); len(got) != 0 {
		t.Errorf("Search(registries) = %v, want the dropped note gone", got)
	}
	if es := entries(P2); len(es) != 1 || es[0].Stamp != "other" {
		t.Errorf("Entries(p2) = %v, want its one note untouched", es)
	}
}

// testAnyQuery feeds FTS5 syntax, broken and not, as plain text.
func testAnyQuery(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1)
	doSync(t, idx, P1, Notes(P1))
	for _, tc := range []struct {
		query string
		want  []string // nil: only "no error" is checked
	}{
		{`"opencode"`, []string{"liveness-probe"}},
		{`"opencode`, []string{"liveness-probe"}},
		{`opencode"`, []string{"liveness-probe"}},
		{`(watchdog AND codex)`, []string{"liveness-probe"}},
		{`watchdog OR codex`, []string{"liveness-probe"}},
		{`NOT registries`, []string{"cross-talk"}},
		{`open*`, []string{"liveness-probe"}},
		{`NEAR(codex opencode, 5)`, nil},
		{`NEAR(codex opencode)`, []string{"liveness-probe"}},
		{`description:registries`, nil},
		{`{name description}: watchdog`, nil},
		{`^watchdog`, []string{"cross-talk", "liveness-probe"}},
		{`watchdog -codex`, []string{"liveness-probe"}},
		{`+watchdog`, []string{"cross-talk", "liveness-probe"}},
		{`re-arms`, []string{"liveness-probe"}},
		{`d'activité`, []string{"sonde-vivacite"}},
		{`'single' "double" ""quoted""`, []string{}},
		{`*`, []string{}},
		{`"`, []string{}},
		{`()`, []string{}},
		{`AND`, []string{}},
		{`NOT NOT`, []string{}},
		{``, []string{}},
		{"   \t\n", []string{}},
		{"nul\x00byte", []string{}},
		{"bad\xffutf8", []string{}},
		{strings.Repeat("watchdog ", 500), []string{"cross-talk", "liveness-probe"}},
		{strings.Repeat("(", 1000), []string{}},
		{`rowid = 1; DROP TABLE notes; --`, []string{}},
	} {
		hits, err := idx.Search(t.Context(), P1, tc.query, 10)
		if err != nil {
			t.Errorf("Search(%q): %v, want no error", tc.query, err)
			continue
		}
		if tc.want != nil {
			if got := sorted(names(hits)); !slices.Equal(got, sorted(tc.want)) {
				t.Errorf("Search(%q) = %v, want %v", tc.query, got, tc.want)
			}
		}
	}
	if got := names(search(t, idx, P1, "watchdog", 10)); len(got) != 2 {
		t.Errorf("after the odd queries, Search(watchdog) = %v, want the index intact", got)
	}
}

// testIsolation is contract C1 for the index: a project and its copy hold
// notes of the same names; neither ever sees the other's.
func testIsolation(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1, P2, P3)
	n1, n2 := Notes(P1), Notes(P2)
	n1[0].Body += "alpha only in the first project\n"
	n2[0].Body += "bravo only in the copy\n"
	doSync(t, idx, P1, n1)
	doSync(t, idx, P2, n2)

	check := func(project troupe.ProjectID, query string, want int) {
		t.Helper()
		hits := search(t, idx, project, query, 10)
		if len(hits) != want {
			t.Errorf("Search(%s, %q) = %v, want %d hits", project, query, names(hits), want)
		}
		for _, h := range hits {
			if !strings.HasPrefix(h.Note.Path, "/work/"+string(project)+"/") {
				t.Errorf("Search(%s, %q) returned %s, a note of another project", project, query, h.Note.Path)
			}
		}
	}
	check(P1, "alpha", 1)
	check(P1, "bravo", 0)
	check(P2, "bravo", 1)
	check(P2, "alpha", 0)
	check(P1, "watchdog", 2)
	check(P2, "watchdog", 2)
	check(P3, "watchdog", 0)

	// Emptying one project leaves the other whole.
	doSync(t, idx, P2, nil)
	check(P2, "watchdog", 0)
	check(P1, "watchdog", 2)
}

func testConcurrent(t *testing.T, newIndex NewIndex) {
	idx := newIndex(t, P1, P2)
	doSync(t, idx, P1, Notes(P1))
	doSync(t, idx, P2, Notes(P2))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range []troupe.ProjectID{P1, P2} {
		wg.Go(func() {
			for i := range 20 {
				notes := Notes(p)
				notes[0].Body += fmt.Sprintf("round%d\n", i)
				if err := Replace(ctx, idx, p, notes); err != nil {
					t.Errorf("Replace(%s): %v", p, err)
					return
				}
			}
		})
		for range 2 {
			wg.Go(func() {
				for range 20 {
					hits, err := idx.Search(ctx, p, "watchdog", 10)
					if err != nil {
						t.Errorf("Search(%s): %v", p, err)
						return
					}
					if len(hits) != 2 {
						t.Errorf("Search(%s, watchdog) during syncs = %v, want 2 hits", p, names(hits))
						return
					}
				}
			})
		}
	}
	wg.Wait()
}
