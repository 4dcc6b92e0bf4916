package claudesessions

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixtureDir copies the captured transcripts (print mode and TUI) into a
// config folder's projects/ and returns the config folder.
func fixtureDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, mode := range []string{"print-mode", "tui"} {
		src := filepath.Join("testdata", "transcripts", mode)
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			dst := filepath.Join(dir, "projects", rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o600)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func fileByID(t *testing.T, x *Index, id string) File {
	t.Helper()
	for _, f := range x.Files() {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("session %s not indexed", id)
	return File{}
}

func TestIndexFixtures(t *testing.T) {
	dir := fixtureDir(t)
	x := NewIndex(Options{Dir: dir})
	rep, err := x.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Read != 13 || len(x.Files()) != 13 {
		t.Fatalf("read %d files, indexed %d; want 13", rep.Read, len(x.Files()))
	}
	// The listing's fields from head and tail equal those of a whole read.
	headTail := map[string]File{}
	for _, f := range x.Files() {
		headTail[f.ID] = f
	}
	for more := true; more; {
		if more, err = x.Deepen(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range x.Files() {
		h := headTail[f.ID]
		if !f.Complete {
			t.Errorf("%s not complete after Deepen", f.ID)
		}
		if h.Cwd != f.Cwd || h.Title != f.Title || h.Prompt != f.Prompt || !h.First.Equal(f.First) || !h.Last.Equal(f.Last) || h.Model != f.Model {
			t.Errorf("%s: head and tail gave %+v\nwhole read gives %+v", f.ID, h.Summary, f.Summary)
		}
		if h.Messages > f.Messages || (!h.Complete && h.Stamp.Size <= 2*DefaultHeadTail) {
			t.Errorf("%s: messages %d from head and tail, %d whole (complete %v, %d bytes)", f.ID, h.Messages, f.Messages, h.Complete, h.Stamp.Size)
		}
	}
	// The print-mode session resumed from another cwd: its first cwd is the original.
	f := fileByID(t, x, "aaaaaaaa-bbbb-4ccc-8ddd-000000000001")
	want := Summary{ID: "aaaaaaaa-bbbb-4ccc-8ddd-000000000001", Cwd: "/home/lab-a/work/fixproj", Title: "hello", TitleKind: "prompt",
		Prompt: "hello", Messages: 6, Model: "claude-opus-5-5", Version: "2.1.328"}
	got := f.Summary
	got.First, got.Last, got.GitBranch, got.Skipped = time.Time{}, time.Time{}, "", 0
	if got != want {
		t.Errorf("summary\n got %+v\nwant %+v", got, want)
	}
	if f.First.Format(time.RFC3339Nano) != "2026-11-29T18:19:41.233Z" {
		t.Errorf("first = %v", f.First)
	}
	if !f.Last.After(f.First) || f.Last.Before(time.Date(2026, 11, 29, 18, 19, 54, 0, time.UTC)) {
		t.Errorf("last = %v", f.Last)
	}
	if f.Skipped != 0 {
		t.Errorf("skipped %d lines of a clean transcript", f.Skipped)
	}
	// The TUI session has an ai-title, which wins over the prompt.
	tui := fileByID(t, x, "eb257b80-35d9-4da9-a31d-186d4f4ab825")
	if tui.Title != "Fake title" || tui.TitleKind != "ai" || tui.Cwd != "/home/lab-a/work/raw-pretrusted" {
		t.Errorf("tui: title %q (%s), cwd %q", tui.Title, tui.TitleKind, tui.Cwd)
	}
	if tui.Prompt == "" || tui.Model != "claude-opus-5-5" || tui.Messages == 0 {
		t.Errorf("tui: prompt %q model %q messages %d", tui.Prompt, tui.Model, tui.Messages)
	}
}
