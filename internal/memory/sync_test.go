package memory

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// trace records the scans and reads of a Store, by project folder.
type trace struct {
	mu  sync.Mutex
	got []string // "scan <project dir>", "read <project dir>/<file>"
}

func observed(s *Store) *trace {
	tr := &trace{}
	s.observe = func(what, path string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		rel := strings.TrimSuffix(path, string(filepath.Separator)+filepath.FromSlash(Dir))
		if what == "read" {
			rel = filepath.Dir(filepath.Dir(filepath.Dir(path))) + "/" + filepath.Base(path)
		}
		tr.got = append(tr.got, what+" "+rel)
	}
	return tr
}

// take returns what was recorded since the last take.
func (tr *trace) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	got := tr.got
	tr.got = nil
	return got
}

func hitNames(t *testing.T, s *Store, p troupe.Project, query string) []string {
	t.Helper()
	hits, err := s.Search(t.Context(), p, query, 50)
	if err != nil {
		t.Fatalf("Search(%s, %q): %v", p.ID, query, err)
	}
	names := []string{}
	for _, h := range hits {
		names = append(names, h.Note.Name)
	}
	return names
}

// settle sets the memory folder's modification time in the past, as it is
// once nothing has changed in it for a while: a later change of an entry
// then shows in its stat whatever the clock's granularity.
func settle(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(Dir)), old, old); err != nil {
		t.Fatal(err)
	}
}

// TestSearchUnchangedFolderReadsNothing: with the folder watched and
// nothing reported, a search neither lists the folder nor reads a file;
// without a watch it lists and stats, and still reads nothing unchanged.
func TestSearchUnchangedFolderReadsNothing(t *testing.T) {
	s := New(Options{})
	tr := observed(s)
	dir := project(t)
	for i := range 5 {
		put(t, dir, fmt.Sprintf(".troupe/memory/n%d.md", i), noteText(fmt.Sprintf("n%d", i), "d", "watchdog\n"))
	}
	p := troupe.Project{ID: "p", Path: dir}
	s.Watched(p.ID, true)
	if got := hitNames(t, s, p, "watchdog"); len(got) != 5 {
		t.Fatalf("first search = %v, want 5 notes", got)
	}
	if got := tr.take(); len(got) != 6 || got[0] != "scan "+dir {
		t.Errorf("first search did %v, want one scan and 5 reads", got)
	}
	for range 3 {
		hitNames(t, s, p, "watchdog")
	}
	if got := tr.take(); len(got) != 0 {
		t.Errorf("searches of an unchanged watched folder did %v, want nothing", got)
	}

	// The watch ends (a watcher failure, Run returning): every search scans,
	// and reads only what changed.
	s.Watched(p.ID, false)
	hitNames(t, s, p, "watchdog")
	if got := tr.take(); !slices.Equal(got, []string{"scan " + dir}) {
		t.Errorf("search of an unwatched folder did %v, want one scan, no read", got)
	}
	put(t, dir, ".troupe/memory/n3.md", noteText("n3", "d", "edited in place: zebra\n"))
	if got := hitNames(t, s, p, "zebra"); !slices.Equal(got, []string{"n3"}) {
		t.Errorf("Search(zebra) after an edit in an unwatched folder = %v", got)
	}
	if got := tr.take(); !slices.Equal(got, []string{"scan " + dir, "read " + dir + "/n3.md"}) {
		t.Errorf("search after an edit did %v, want one scan and one read", got)
	}
}

// TestSearchSeesOtherWriters: files written by another process are found
// by the next search: a file dropped into the folder through the folder's
// stat (before any event), an edit in place through the event reported
// (Changed), which stats that file alone.
func TestSearchSeesOtherWriters(t *testing.T) {
	s := New(Options{})
	tr := observed(s)
	dir := project(t)
	put(t, dir, ".troupe/memory/first.md", noteText("first", "d", "alpha\n"))
	p := troupe.Project{ID: "p", Path: dir}
	s.Watched(p.ID, true)
	settle(t, dir)
	hitNames(t, s, p, "alpha")
	tr.take()

	// Dropped in (created, no event reported yet).
	put(t, dir, ".troupe/memory/dropped.md", noteText("dropped", "d", "bravo\n"))
	if got := hitNames(t, s, p, "bravo"); !slices.Equal(got, []string{"dropped"}) {
		t.Errorf("Search(bravo) after a file was dropped in = %v, want [dropped]", got)
	}
	if got := tr.take(); !slices.Equal(got, []string{"scan " + dir, "read " + dir + "/dropped.md"}) {
		t.Errorf("that search did %v, want one scan and one read", got)
	}

	// Edited in place: the folder's stat is unchanged; the event says which.
	settle(t, dir)
	hitNames(t, s, p, "bravo") // the folder's new stamp
	tr.take()
	put(t, dir, ".troupe/memory/first.md", noteText("first", "d", "charlie\n"))
	s.Changed(p.ID, "first.md")
	s.Changed(p.ID, ".first.md.tmp-1") // not a note: ignored
	if got := hitNames(t, s, p, "charlie"); !slices.Equal(got, []string{"first"}) {
		t.Errorf("Search(charlie) after an edit in place = %v, want [first]", got)
	}
	if got := tr.take(); !slices.Equal(got, []string{"read " + dir + "/first.md"}) {
		t.Errorf("that search did %v, want one read and no scan", got)
	}

	// Removed, reported: gone from the index.
	if err := os.Remove(filepath.Join(dir, ".troupe", "memory", "dropped.md")); err != nil {
		t.Fatal(err)
	}
	s.Changed(p.ID, "dropped.md")
	if got := hitNames(t, s, p, "bravo"); len(got) != 0 {
		t.Errorf("Search(bravo) after the removal = %v, want nothing", got)
	}
	// A lost event ("") makes a scan.
	tr.take()
	s.Changed(p.ID, "")
	hitNames(t, s, p, "charlie")
	if got := tr.take(); !slices.Equal(got, []string{"scan " + dir}) {
		t.Errorf("search after a lost event did %v, want one scan", got)
	}
}

// TestProjectsDoNotInvalidateEachOther: a write in one project, or an event
// of its folder, costs the other project's searches nothing.
func TestProjectsDoNotInvalidateEachOther(t *testing.T) {
	s := New(Options{})
	tr := observed(s)
	a, b := project(t), project(t)
	pa, pb := troupe.Project{ID: "pa", Path: a}, troupe.Project{ID: "pb", Path: b}
	for _, p := range []troupe.Project{pa, pb} {
		if _, err := s.Write(t.Context(), p.Path, Note{Name: "base", Description: "d", Body: "watchdog\n"}); err != nil {
			t.Fatal(err)
		}
		s.Watched(p.ID, true)
		hitNames(t, s, p, "watchdog")
	}
	tr.take()
	if _, err := s.Write(t.Context(), a, Note{Name: "more", Description: "d", Body: "watchdog again\n"}); err != nil {
		t.Fatal(err)
	}
	s.Changed(pa.ID, "more.md")
	if got := hitNames(t, s, pb, "watchdog"); !slices.Equal(got, []string{"base"}) {
		t.Errorf("Search(pb) = %v", got)
	}
	if got := tr.take(); len(got) != 0 {
		t.Errorf("search in pb after a write in pa did %v, want nothing", got)
	}
	if got := hitNames(t, s, pa, "watchdog"); !slices.Equal(got, []string{"base", "more"}) {
		t.Errorf("Search(pa) = %v", got)
	}
	for _, op := range tr.take() {
		if !strings.Contains(op, a) {
			t.Errorf("search in pa did %s, outside pa", op)
		}
	}
}

// TestRestartReconciles: a new Store on an index that persisted (a daemon
// restart) reads only the files that changed since, and drops the removed.
func TestRestartReconciles(t *testing.T) {
	idx := NewMemIndex()
	dir := project(t)
	p := troupe.Project{ID: "p", Path: dir}
	first := New(Options{Index: idx})
	for i := range 20 {
		if _, err := first.Write(t.Context(), dir, Note{Name: fmt.Sprintf("n%02d", i), Description: "d", Body: "watchdog\n"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := hitNames(t, first, p, "watchdog"); len(got) != 20 {
		t.Fatalf("first search = %d notes, want 20", len(got))
	}

	// While no daemon runs: one edited, one removed, one added.
	put(t, dir, ".troupe/memory/n05.md", noteText("n05", "d", "edited zebra\n"))
	if err := os.Remove(filepath.Join(dir, ".troupe", "memory", "n07.md")); err != nil {
		t.Fatal(err)
	}
	put(t, dir, ".troupe/memory/added.md", noteText("added", "d", "watchdog zebra\n"))

	second := New(Options{Index: idx})
	tr := observed(second)
	if got := hitNames(t, second, p, "zebra"); !slices.Equal(got, []string{"added", "n05"}) {
		t.Errorf("Search(zebra) after the restart = %v", got)
	}
	if got := tr.take(); !slices.Equal(got, []string{"scan " + dir, "read " + dir + "/added.md", "read " + dir + "/n05.md"}) &&
		!slices.Equal(got, []string{"scan " + dir, "read " + dir + "/n05.md", "read " + dir + "/added.md"}) {
		t.Errorf("first search after the restart did %v, want one scan and the two changed files read", got)
	}
	if got := hitNames(t, second, p, "watchdog"); len(got) != 19 || slices.Contains(got, "n07") || slices.Contains(got, "n05") {
		t.Errorf("Search(watchdog) after the restart = %v, want 19 notes, without n07 (removed) and n05 (edited)", got)
	}
}

// TestBriefing: a small set of notes is the whole index in name order; a
// large one is capped at MaxBriefing bytes, most recent notes first, with
// a line counting the rest.
func TestBriefing(t *testing.T) {
	s := New(Options{})
	dir := project(t)
	p := troupe.Project{ID: "p", Path: dir}
	for _, n := range []Note{{Name: "zulu", Description: "Last by name"}, {Name: "alpha", Description: "First by name"}} {
		if _, err := s.Write(t.Context(), dir, n); err != nil {
			t.Fatal(err)
		}
	}
	want := indexHeader + "- alpha: First by name\n- zulu: Last by name\n"
	if got := s.Briefing(t.Context(), p); got != want {
		t.Errorf("Briefing of two notes =\n%s\nwant\n%s", got, want)
	}
	if _, err := s.Write(t.Context(), dir, Note{Name: "mike", Description: "Written since"}); err != nil {
		t.Fatal(err)
	}
	want = indexHeader + "- alpha: First by name\n- mike: Written since\n- zulu: Last by name\n"
	if got := s.Briefing(t.Context(), p); got != want {
		t.Errorf("Briefing after a write =\n%s\nwant\n%s", got, want)
	}
	if got := s.Briefing(t.Context(), troupe.Project{ID: "empty", Path: project(t)}); got != "" {
		t.Errorf("Briefing without notes = %q, want empty", got)
	}

	// 500 notes of ~110-byte lines: 55 KB in all.
	big := project(t)
	pb := troupe.Project{ID: "big", Path: big}
	base := time.Now().Add(-time.Hour)
	const total = 500
	for i := range total {
		name := fmt.Sprintf("note-%03d", i)
		put(t, big, ".troupe/memory/"+name+".md", noteText(name, "A description of about a hundred bytes, "+strings.Repeat("x", 50), "body\n"))
		mt := base.Add(time.Duration(i) * time.Second) // note-499 is the newest
		if err := os.Chtimes(filepath.Join(big, ".troupe", "memory", name+".md"), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Briefing(t.Context(), pb)
	if len(got) > MaxBriefing {
		t.Errorf("Briefing is %d bytes, more than MaxBriefing (%d)", len(got), MaxBriefing)
	}
	if len(got) < MaxBriefing-200 {
		t.Errorf("Briefing is %d bytes, want it filled near MaxBriefing (%d)", len(got), MaxBriefing)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if lines[0]+"\n" != recentHeader {
		t.Errorf("first line = %q, want %q", lines[0], recentHeader)
	}
	shown := lines[1 : len(lines)-1]
	for i, l := range shown {
		if want := fmt.Sprintf("- note-%03d: ", total-1-i); !strings.HasPrefix(l, want) {
			t.Fatalf("line %d = %q, want it to start %q: newest first", i+1, l, want)
		}
	}
	if want := fmt.Sprintf("%d more notes: search them with memory_search", total-len(shown)); lines[len(lines)-1] != want {
		t.Errorf("last line = %q, want %q", lines[len(lines)-1], want)
	}
}
