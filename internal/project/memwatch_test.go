package project_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMemoryDirIsMemorysDir(t *testing.T) {
	if project.MemoryDir != memory.Dir {
		t.Errorf("project.MemoryDir = %q, memory.Dir = %q: they must agree", project.MemoryDir, memory.Dir)
	}
}

// memEvent is one call of a MemoryWatcher.
type memEvent struct {
	p    troupe.ProjectID
	what string // "watched", "unwatched", or the changed file's name
}

// relay passes the registry's reports on to a memory.Store, and to a
// channel the test waits on.
type relay struct {
	store *memory.Store
	ch    chan memEvent
}

func (r relay) Watched(p troupe.ProjectID, on bool) {
	if r.store != nil {
		r.store.Watched(p, on)
	}
	what := "unwatched"
	if on {
		what = "watched"
	}
	r.ch <- memEvent{p, what}
}

func (r relay) Changed(p troupe.ProjectID, name string) {
	if r.store != nil {
		r.store.Changed(p, name)
	}
	r.ch <- memEvent{p, name}
}

// waitFor waits for the report want, skipping others.
func waitFor(t *testing.T, ch <-chan memEvent, want memEvent) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev == want {
				return
			}
		case <-timeout:
			t.Fatalf("no report %+v within 10s", want)
		}
	}
}

func startRegistry(t *testing.T, mw project.MemoryWatcher, dirs ...string) (*project.Registry, []troupe.ProjectID) {
	t.Helper()
	r, err := project.Open(t.Context(), project.Options{Store: project.NewMemStore(), Memory: mw})
	if err != nil {
		t.Fatal(err)
	}
	var ids []troupe.ProjectID
	for _, d := range dirs {
		info, err := r.Add(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r, ids
}

func writeNote(t *testing.T, dir, name, body string) {
	t.Helper()
	data := memory.Format(memory.Note{Name: name, Description: "d", Type: "project", Body: body})
	if err := os.WriteFile(filepath.Join(dir, ".troupe", "memory", name+".md"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryReportsMemoryEvents: the folder's watch begins when Run
// starts (or when the folder appears), each file event is reported with
// its project, and the watch ends when the folder goes; a project without
// the folder is never watched.
func TestRegistryReportsMemoryEvents(t *testing.T) {
	withNotes, without := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(withNotes, ".troupe", "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	ch := make(chan memEvent, 1000)
	_, ids := startRegistry(t, relay{ch: ch}, withNotes, without)
	a, b := ids[0], ids[1]
	waitFor(t, ch, memEvent{a, "watched"})

	writeNote(t, withNotes, "first", "alpha\n")
	waitFor(t, ch, memEvent{a, "first.md"})

	// The folder appears in the other project (and .troupe with it).
	if err := os.MkdirAll(filepath.Join(without, ".troupe", "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, memEvent{b, "watched"})
	writeNote(t, without, "second", "bravo\n")
	waitFor(t, ch, memEvent{b, "second.md"})

	if err := os.RemoveAll(filepath.Join(withNotes, ".troupe", "memory")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, memEvent{a, "unwatched"})
	if err := os.MkdirAll(filepath.Join(withNotes, ".troupe", "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, memEvent{a, "watched"})
}

// TestMemorySearchFollowsTheWatcher: the registry's watcher and the memory
// store together: an edit in place by another process (the folder's own
// stat unchanged) is found by the first search after its event, with no
// scan of the folder.
func TestMemorySearchFollowsTheWatcher(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".troupe", "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		writeNote(t, dir, fmt.Sprintf("n%d", i), "alpha\n")
	}
	store := memory.New(memory.Options{})
	ch := make(chan memEvent, 1000)
	_, ids := startRegistry(t, relay{store: store, ch: ch}, dir)
	p := troupe.Project{ID: ids[0], Path: dir}
	waitFor(t, ch, memEvent{p.ID, "watched"})
	search := func(q string) int {
		t.Helper()
		hits, err := store.Search(t.Context(), p, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(hits)
	}
	if got := search("alpha"); got != 3 {
		t.Fatalf("Search(alpha) = %d hits, want 3", got)
	}
	writeNote(t, dir, "n1", "zebra\n") // in place: same file, same folder
	waitFor(t, ch, memEvent{p.ID, "n1.md"})
	if got := search("zebra"); got != 1 {
		t.Errorf("Search(zebra) after the edit's event = %d hits, want 1", got)
	}
	if got := search("alpha"); got != 2 {
		t.Errorf("Search(alpha) after the edit = %d hits, want 2", got)
	}
}
