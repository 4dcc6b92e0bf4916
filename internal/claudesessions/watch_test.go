package claudesessions

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Run's watcher reports an appended transcript (the next sync reads it
// without a full pass) and a new project folder; Run returns when its
// context ends. Real inotify events: waited for, bounded.
func TestRunWatchesAndStops(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "projects", "-w", sid1+".jsonl")
	writeT(t, p, userLine(sid1, "/w", "2026-11-29T10:00:00Z", "a"), false)
	x := NewIndex(Options{Dir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.Run(ctx) }()
	waitFor := func(what string, ok func() bool) { t.Helper(); waitNoted(t, x, what, ok) }
	waitFor("watching", func() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.watching })
	if rep, err := x.Sync(ctx); err != nil || !rep.Full || rep.Read != 1 {
		t.Fatalf("first sync: %+v %v", rep, err)
	}
	writeT(t, p, assistantLine(sid1, "2026-11-29T10:00:01Z", "m", "x"), true)
	waitFor("the append reported", func() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.dirty[p] })
	if rep, _ := x.Sync(ctx); rep.Full || rep.Read != 1 || rep.Stated != 1 {
		t.Errorf("sync after an append: %+v, want that file alone", rep)
	}
	q := filepath.Join(dir, "projects", "-new", sid2+".jsonl")
	writeT(t, q, userLine(sid2, "/new", "2026-11-29T10:00:00Z", "b"), false)
	waitFor("the new folder reported", func() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.full })
	if rep, _ := x.Sync(ctx); !rep.Full || len(x.Files()) != 2 {
		t.Errorf("sync after a new folder: %+v, %d files", rep, len(x.Files()))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if x.watching {
		t.Error("still watching after Run returned")
	}
}

// TestRunSeesAClaudeFolderMadeLater: Claude Code's config folder does not
// exist when Run starts (it never ran as this user); its first session
// is reported as soon as the files appear, not at the next full pass.
func TestRunSeesAClaudeFolderMadeLater(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".claude")
	x := NewIndex(Options{Dir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- x.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitNoted(t, x, "watching", func() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.watching })
	if rep, err := x.Sync(ctx); err != nil || len(x.Files()) != 0 {
		t.Fatalf("first sync: %+v %v", rep, err)
	}
	writeT(t, filepath.Join(dir, "projects", "-w", sid1+".jsonl"), userLine(sid1, "/w", "2026-11-29T10:00:00Z", "a"), false)
	waitNoted(t, x, "the new config folder reported", func() bool { x.mu.Lock(); defer x.mu.Unlock(); return x.full })
	if _, err := x.Sync(ctx); err != nil || len(x.Files()) != 1 {
		t.Fatalf("sync after the folder appeared: %d files, %v", len(x.Files()), err)
	}
}

// waitNoted waits until ok holds, looking again at each report of x's
// watcher (x.noted: no polling), 10 s at most.
func waitNoted(t *testing.T, x *Index, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !ok() {
		select {
		case <-x.noted:
		case <-deadline:
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}
