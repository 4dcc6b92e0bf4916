// Package storetest holds the contract suites that every store
// implementation runs, so that each implementation (SQLite, and any
// in-memory fake) is held to the same behaviour.
//
// It imports only the standard library, internal/troupe and the packages
// that define the interfaces under test. Only tests import it.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// RunProjectStore runs the project.Store contract against the stores that
// open returns. open is called once per subtest and must return a new,
// empty store; it registers any cleanup with t.Cleanup.
//
// Time precision: a store must give AddedAt back as the same instant to the
// nanosecond (time.Time.Equal). It may drop the location and the monotonic
// clock reading. The suite uses times within the years 1678 to 2261.
//
// Subtests that run goroutines are meaningful under -race.
func RunProjectStore(t *testing.T, open func(t *testing.T) project.Store) {
	t.Helper()
	t.Run("AddListOrder", func(t *testing.T) { testAddListOrder(t, open(t)) })
	t.Run("EmptyList", func(t *testing.T) { testEmptyList(t, open(t)) })
	t.Run("DuplicateID", func(t *testing.T) { testDuplicateID(t, open(t)) })
	t.Run("DuplicatePath", func(t *testing.T) { testDuplicatePath(t, open(t)) })
	t.Run("Remove", func(t *testing.T) { testRemove(t, open(t)) })
	t.Run("RemoveMissing", func(t *testing.T) { testRemoveMissing(t, open(t)) })
	t.Run("SaveLastTeam", func(t *testing.T) { testSaveLastTeam(t, open(t)) })
	t.Run("LastTeamNone", func(t *testing.T) { testLastTeamNone(t, open(t)) })
	t.Run("SaveTeamMissingProject", func(t *testing.T) { testSaveTeamMissingProject(t, open(t)) })
	t.Run("TeamSourceNotAliased", func(t *testing.T) { testTeamSourceNotAliased(t, open(t)) })
	t.Run("TeamRemovedWithProject", func(t *testing.T) { testTeamRemovedWithProject(t, open(t)) })
	t.Run("Approval", func(t *testing.T) { testApproval(t, open(t)) })
	t.Run("ConcurrentAdds", func(t *testing.T) { testConcurrentAdds(t, open(t)) })
	t.Run("ConcurrentDuplicateAdds", func(t *testing.T) { testConcurrentDuplicateAdds(t, open(t)) })
	t.Run("ValuesRoundTrip", func(t *testing.T) { testValuesRoundTrip(t, open(t)) })
}

// base is a fixed instant with nanoseconds, far from any rounding boundary.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

func proj(id, path string, added time.Time) troupe.Project {
	return troupe.Project{ID: troupe.ProjectID(id), Path: path, Name: lastElem(path), AddedAt: added}
}

func lastElem(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

func mustAdd(t *testing.T, s project.Store, ps ...troupe.Project) {
	t.Helper()
	for _, p := range ps {
		if err := s.AddProject(t.Context(), p); err != nil {
			t.Fatalf("AddProject(%s): %v", p.ID, err)
		}
	}
}

func mustList(t *testing.T, s project.Store) []troupe.Project {
	t.Helper()
	ps, err := s.Projects(t.Context())
	if err != nil {
		t.Fatalf("Projects: %v", err)
	}
	return ps
}

// equalProjects compares field by field, times as instants.
func equalProjects(a, b []troupe.Project) bool {
	return slices.EqualFunc(a, b, func(x, y troupe.Project) bool {
		return x.ID == y.ID && x.Path == y.Path && x.Name == y.Name && x.AddedAt.Equal(y.AddedAt)
	})
}

func ids(ps []troupe.Project) []troupe.ProjectID {
	out := make([]troupe.ProjectID, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func testAddListOrder(t *testing.T, s project.Store) {
	// Inserted out of order; "b" and "a" share an instant, so ID breaks
	// the tie; "c" is 1 ns after them.
	mustAdd(t, s,
		proj("d", "/w/d", base.Add(time.Hour)),
		proj("b", "/w/b", base),
		proj("c", "/w/c", base.Add(time.Nanosecond)),
		proj("a", "/w/a", base),
		proj("e", "/w/e", base.Add(-time.Hour)),
	)
	got := ids(mustList(t, s))
	want := []troupe.ProjectID{"e", "a", "b", "c", "d"}
	if !slices.Equal(got, want) {
		t.Errorf("Projects order = %v, want %v (by AddedAt, then ID)", got, want)
	}
}

func testEmptyList(t *testing.T, s project.Store) {
	if ps := mustList(t, s); len(ps) != 0 {
		t.Errorf("Projects on a new store = %v, want none", ps)
	}
}

func testDuplicateID(t *testing.T, s project.Store) {
	first := proj("p1", "/w/one", base)
	mustAdd(t, s, first)
	err := s.AddProject(t.Context(), proj("p1", "/w/other", base.Add(time.Second)))
	if !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Fatalf("AddProject with a registered id: err = %v, want troupe.ErrAlreadyExists", err)
	}
	if got := mustList(t, s); !equalProjects(got, []troupe.Project{first}) {
		t.Errorf("after the refused add, Projects = %v, want only %v", got, first)
	}
}

func testDuplicatePath(t *testing.T, s project.Store) {
	first := proj("p1", "/w/one", base)
	mustAdd(t, s, first)
	err := s.AddProject(t.Context(), proj("p2", "/w/one", base.Add(time.Second)))
	if !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Fatalf("AddProject with a registered path: err = %v, want troupe.ErrAlreadyExists", err)
	}
	if got := mustList(t, s); !equalProjects(got, []troupe.Project{first}) {
		t.Errorf("after the refused add, Projects = %v, want only %v", got, first)
	}
}

func testRemove(t *testing.T, s project.Store) {
	mustAdd(t, s, proj("p1", "/w/one", base), proj("p2", "/w/two", base.Add(time.Second)))
	if err := s.RemoveProject(t.Context(), "p1"); err != nil {
		t.Fatalf("RemoveProject(p1): %v", err)
	}
	if got := ids(mustList(t, s)); !slices.Equal(got, []troupe.ProjectID{"p2"}) {
		t.Errorf("after removing p1, Projects = %v, want [p2]", got)
	}
	// The id and the path are free again.
	mustAdd(t, s, proj("p1", "/w/one", base.Add(2*time.Second)))
	if got := ids(mustList(t, s)); !slices.Equal(got, []troupe.ProjectID{"p2", "p1"}) {
		t.Errorf("after adding p1 again, Projects = %v, want [p2 p1]", got)
	}
}

func testRemoveMissing(t *testing.T, s project.Store) {
	mustAdd(t, s, proj("p1", "/w/one", base))
	err := s.RemoveProject(t.Context(), "nope")
	if !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("RemoveProject(unknown): err = %v, want troupe.ErrNotFound", err)
	}
	if got := ids(mustList(t, s)); !slices.Equal(got, []troupe.ProjectID{"p1"}) {
		t.Errorf("after the refused remove, Projects = %v, want [p1]", got)
	}
}

func testSaveLastTeam(t *testing.T, s project.Store) {
	ctx := t.Context()
	mustAdd(t, s, proj("p1", "/w/one", base), proj("p2", "/w/two", base))
	if got, err := s.LastTeam(ctx, "p1"); err != nil || got != nil {
		t.Fatalf("LastTeam before any save = %q, %v; want nil, nil", got, err)
	}
	for _, src := range []string{"[[agent]]\nname = \"a\"\n", "[[agent]]\nname = \"b\"\n"} {
		if err := s.SaveTeam(ctx, "p1", []byte(src)); err != nil {
			t.Fatalf("SaveTeam: %v", err)
		}
		got, err := s.LastTeam(ctx, "p1")
		if err != nil || string(got) != src {
			t.Fatalf("LastTeam = %q, %v; want %q (the last save wins)", got, err, src)
		}
	}
	if got, err := s.LastTeam(ctx, "p2"); err != nil || got != nil {
		t.Errorf("LastTeam of another project = %q, %v; want nil, nil", got, err)
	}
	// A saved empty file is a saved team, not "none".
	if err := s.SaveTeam(ctx, "p2", []byte{}); err != nil {
		t.Fatalf("SaveTeam(empty): %v", err)
	}
	if got, err := s.LastTeam(ctx, "p2"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("LastTeam after saving an empty source = %#v, %v; want a non-nil empty slice", got, err)
	}
}

func testLastTeamNone(t *testing.T, s project.Store) {
	if got, err := s.LastTeam(t.Context(), "nope"); err != nil || got != nil {
		t.Errorf("LastTeam(unregistered) = %q, %v; want nil, nil", got, err)
	}
}

func testSaveTeamMissingProject(t *testing.T, s project.Store) {
	err := s.SaveTeam(t.Context(), "nope", []byte("x"))
	if !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("SaveTeam(unregistered): err = %v, want troupe.ErrNotFound", err)
	}
}

func testTeamSourceNotAliased(t *testing.T, s project.Store) {
	ctx := t.Context()
	mustAdd(t, s, proj("p1", "/w/one", base))
	src := []byte("original")
	if err := s.SaveTeam(ctx, "p1", src); err != nil {
		t.Fatalf("SaveTeam: %v", err)
	}
	copy(src, "CHANGED!") // the caller reuses its buffer
	got, err := s.LastTeam(ctx, "p1")
	if err != nil || string(got) != "original" {
		t.Fatalf("LastTeam after the caller changed its slice = %q, %v; want %q", got, err, "original")
	}
	copy(got, "CHANGED!") // and the reader changes what it got
	again, err := s.LastTeam(ctx, "p1")
	if err != nil || string(again) != "original" {
		t.Errorf("LastTeam after a reader changed its slice = %q, %v; want %q", again, err, "original")
	}
}

func testTeamRemovedWithProject(t *testing.T, s project.Store) {
	ctx := t.Context()
	mustAdd(t, s, proj("p1", "/w/one", base))
	if err := s.SaveTeam(ctx, "p1", []byte("team")); err != nil {
		t.Fatalf("SaveTeam: %v", err)
	}
	if err := s.RemoveProject(ctx, "p1"); err != nil {
		t.Fatalf("RemoveProject: %v", err)
	}
	if got, err := s.LastTeam(ctx, "p1"); err != nil || got != nil {
		t.Errorf("LastTeam after RemoveProject = %q, %v; want nil, nil", got, err)
	}
	// A project registered again under the same id starts without a team.
	mustAdd(t, s, proj("p1", "/w/one", base))
	if got, err := s.LastTeam(ctx, "p1"); err != nil || got != nil {
		t.Errorf("LastTeam of a re-added project = %q, %v; want nil, nil", got, err)
	}
}

// testApproval: the approved team and the rejected digest are kept per
// project, the last save wins, an empty team is saved (not "none"), and
// they go with the project.
func testApproval(t *testing.T, s project.Store) {
	ctx := t.Context()
	if err := s.SaveApproval(ctx, "p1", project.Approval{Team: []byte("x")}); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("SaveApproval(unregistered): %v; want troupe.ErrNotFound", err)
	}
	mustAdd(t, s, proj("p1", "/w/one", base))
	mustAdd(t, s, proj("p2", "/w/two", base.Add(1)))
	if _, ok, err := s.Approval(ctx, "p1"); ok || err != nil {
		t.Fatalf("Approval before any save: %v, %v; want none", ok, err)
	}
	if err := s.SaveApproval(ctx, "p1", project.Approval{Team: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveApproval(ctx, "p1", project.Approval{Team: []byte("two"), Rejected: "d1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveApproval(ctx, "p2", project.Approval{}); err != nil {
		t.Fatal(err)
	}
	if a, ok, err := s.Approval(ctx, "p1"); !ok || err != nil || string(a.Team) != "two" || a.Rejected != "d1" {
		t.Fatalf("Approval(p1) = %q %q, %v, %v; want the last save", a.Team, a.Rejected, ok, err)
	}
	if a, ok, err := s.Approval(ctx, "p2"); !ok || err != nil || a.Team == nil || len(a.Team) != 0 {
		t.Fatalf("Approval(p2) = %#v, %v, %v; want an empty team saved", a, ok, err)
	}
	if err := s.RemoveProject(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, proj("p1", "/w/one", base))
	if _, ok, err := s.Approval(ctx, "p1"); ok || err != nil {
		t.Fatalf("Approval of a re-added project: %v, %v; want none", ok, err)
	}
}

func testConcurrentAdds(t *testing.T, s project.Store) {
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%02d", w, i)
				p := proj(id, "/w/"+id, base.Add(time.Duration(w*each+i)))
				if err := s.AddProject(t.Context(), p); err != nil {
					t.Errorf("AddProject(%s): %v", id, err)
					return
				}
				if err := s.SaveTeam(t.Context(), p.ID, []byte(id)); err != nil {
					t.Errorf("SaveTeam(%s): %v", id, err)
					return
				}
			}
		})
		// Readers run alongside the writers.
		wg.Go(func() {
			for range each {
				if _, err := s.Projects(t.Context()); err != nil {
					t.Errorf("Projects: %v", err)
					return
				}
				if _, err := s.LastTeam(t.Context(), troupe.ProjectID(fmt.Sprintf("w%d-00", w))); err != nil {
					t.Errorf("LastTeam: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ps := mustList(t, s)
	if len(ps) != workers*each {
		t.Fatalf("Projects after %d concurrent adds: %d projects", workers*each, len(ps))
	}
	for i, p := range ps {
		want := troupe.ProjectID(fmt.Sprintf("w%d-%02d", i/each, i%each))
		if p.ID != want {
			t.Fatalf("Projects[%d] = %s, want %s (ordered by AddedAt)", i, p.ID, want)
		}
		if got, err := s.LastTeam(t.Context(), p.ID); err != nil || string(got) != string(p.ID) {
			t.Fatalf("LastTeam(%s) = %q, %v; want %q", p.ID, got, err, p.ID)
		}
	}
}

func testConcurrentDuplicateAdds(t *testing.T, s project.Store) {
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Half race for one id, half for one path.
			p := proj("same", fmt.Sprintf("/w/%d", i), base)
			if i%2 == 1 {
				p = proj(fmt.Sprintf("p%d", i), "/w/same", base)
			}
			errs[i] = s.AddProject(t.Context(), p)
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, troupe.ErrAlreadyExists):
			t.Errorf("add %d: err = %v, want nil or troupe.ErrAlreadyExists", i, err)
		}
	}
	ps := mustList(t, s)
	if ok != len(ps) {
		t.Errorf("%d adds succeeded but Projects lists %d", ok, len(ps))
	}
	var sameID, samePath int
	for _, p := range ps {
		if p.ID == "same" {
			sameID++
		}
		if p.Path == "/w/same" {
			samePath++
		}
	}
	if sameID != 1 || samePath != 1 {
		t.Errorf("Projects = %v: want exactly one project with id \"same\" (got %d) and one with path /w/same (got %d)",
			ids(ps), sameID, samePath)
	}
}

func testValuesRoundTrip(t *testing.T, s project.Store) {
	ctx := t.Context()
	now := time.Now() // carries a monotonic reading and the local zone
	want := []troupe.Project{
		{ID: "p-utc", Path: "/home/ana/code/app", Name: "app", AddedAt: base},
		{ID: "p-zone", Path: "/home/ana/My Projects/l'été \"x\"", Name: "l'été \"x\"",
			AddedAt: time.Date(2026, 3, 14, 16, 9, 26, 535897933, time.FixedZone("CET", 3600))},
		{ID: "p-now", Path: "/tmp/now", Name: "now", AddedAt: now},
		{ID: "p-old", Path: "/srv/日本語/プロジェクト", Name: "プロジェクト",
			AddedAt: time.Date(1700, 1, 1, 0, 0, 0, 1, time.UTC)},
		{ID: "p-late", Path: "/srv/late", Name: "", AddedAt: time.Date(2261, 12, 31, 23, 59, 59, 999999999, time.UTC)},
	}
	for _, p := range want {
		mustAdd(t, s, p)
	}
	got := mustList(t, s)
	byID := map[troupe.ProjectID]troupe.Project{}
	for _, p := range got {
		byID[p.ID] = p
	}
	for _, w := range want {
		g, ok := byID[w.ID]
		switch {
		case !ok:
			t.Errorf("project %s missing from Projects", w.ID)
		case g.Path != w.Path || g.Name != w.Name:
			t.Errorf("project %s = (%q, %q), want (%q, %q)", w.ID, g.Path, g.Name, w.Path, w.Name)
		case !g.AddedAt.Equal(w.AddedAt):
			t.Errorf("project %s AddedAt = %s, want the instant %s (to the nanosecond)",
				w.ID, g.AddedAt.Format(time.RFC3339Nano), w.AddedAt.Format(time.RFC3339Nano))
		}
	}

	// Team sources are bytes, not text: NULs, invalid UTF-8, and size.
	src := []byte("name = \"a\"\x00\xff\xfe\r\n")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for _, b := range [][]byte{src, big} {
		if err := s.SaveTeam(ctx, "p-utc", b); err != nil {
			t.Fatalf("SaveTeam(%d bytes): %v", len(b), err)
		}
		got, err := s.LastTeam(ctx, "p-utc")
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("LastTeam after saving %d bytes = %d bytes, %v; want them back unchanged", len(b), len(got), err)
		}
	}
}
