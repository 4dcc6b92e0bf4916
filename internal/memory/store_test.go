package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// project returns a new project folder with a .troupe directory.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".troupe"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func put(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// files lists the memory directory of the project in dir, dot files
// included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(Dir)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// tree lists every path under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func noteText(name, description, body string) string {
	return string(Format(Note{Name: name, Description: description, Type: "project", Body: body}))
}

func TestWriteReadRoundTrip(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	in := Note{Name: "liveness-probe", Description: "Fix: an activity token per session", Type: "project",
		Body: "# Liveness\n\nEvery output line bumps the token.\n"}
	before := time.Now().Add(-time.Second)
	saved, err := s.Write(ctx, dir, in)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	wantPath := filepath.Join(dir, ".troupe", "memory", "liveness-probe.md")
	if saved.Path != wantPath || saved.ModTime.Before(before) {
		t.Errorf("Write returned Path %q, ModTime %v; want %q and a fresh time", saved.Path, saved.ModTime, wantPath)
	}
	data, err := os.ReadFile(wantPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(Format(in)) {
		t.Errorf("file holds\n%s\nwant\n%s", data, Format(in))
	}
	fi, err := os.Stat(wantPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o044 == 0 {
		t.Errorf("note mode %v: want it readable like other project files", fi.Mode())
	}

	got, err := s.Read(ctx, dir, "liveness-probe")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got != saved {
		t.Errorf("Read = %+v\nwant %+v", got, saved)
	}
	// Read sanitizes the name it is given, as Write does.
	if got, err := s.Read(ctx, dir, "Liveness Probe"); err != nil || got.Name != "liveness-probe" {
		t.Errorf("Read(Liveness Probe) = %q, %v; want the note liveness-probe", got.Name, err)
	}

	// Replacing keeps one file and no temporary file.
	in.Body = "replaced\n"
	if _, err := s.Write(ctx, dir, in); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Read(ctx, dir, "liveness-probe"); got.Body != "replaced\n" {
		t.Errorf("after a second Write, Body = %q", got.Body)
	}
	if got := files(t, dir); !slices.Equal(got, []string{"liveness-probe.md"}) {
		t.Errorf("memory directory holds %v, want only liveness-probe.md", got)
	}

	list, err := s.List(ctx, dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := saved
	want.Body, want.ModTime = "", list[0].ModTime
	if len(list) != 1 || list[0] != want {
		t.Errorf("List = %+v, want [%+v] (no body)", list, want)
	}
}

func TestWriteDefaultsAndChecks(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	n, err := s.Write(ctx, dir, Note{Name: "no-type", Description: "d"})
	if err != nil || n.Type != DefaultType {
		t.Errorf("Write without a type = %q, %v; want type %q", n.Type, err, DefaultType)
	}
	for _, tc := range []struct {
		note Note
		want string
	}{
		{Note{Name: "x", Description: ""},
			`write memory note x: .troupe/memory/x.md: description: missing: add a one-line summary of the note`},
		{Note{Name: "x", Description: "two\nlines"},
			`write memory note x: .troupe/memory/x.md: description: must be one line of text, without line breaks or control characters`},
		{Note{Name: "x", Description: "d", Type: "Decision Log"},
			`write memory note x: .troupe/memory/x.md: metadata.type: "Decision Log" is not a type: use one lower-case word of at most 40 letters, digits, '-' or '_', like project, user, feedback or reference`},
		{Note{Name: "x", Description: "d", Body: "caf\xe9"},
			`write memory note x: .troupe/memory/x.md: body: not valid UTF-8`},
		{Note{Name: "x", Description: "d", Body: strings.Repeat("x", MaxNoteSize)},
			`write memory note x: .troupe/memory/x.md: body: note is 1048633 bytes, more than the limit of 1048576: split it into several notes`},
	} {
		_, err := s.Write(ctx, dir, tc.note)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Write(%.60q) = %v\nwant %s", tc.note.Description, err, tc.want)
		}
		if !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("Write error %v does not match troupe.ErrInvalid", err)
		}
	}
	if got := files(t, dir); !slices.Equal(got, []string{"no-type.md"}) {
		t.Errorf("memory directory holds %v after refused writes, want only no-type.md", got)
	}
}

func TestWriteSanitizesNames(t *testing.T) {
	s, ctx := New(Options{}), t.Context()
	for _, tc := range []struct{ name, want string }{
		{"ticket95-liveness", "ticket95-liveness"},
		{"Ticket 95: Liveness!", "ticket-95-liveness"},
		{"../../etc/passwd", "etc-passwd"},
		{"/etc/passwd", "etc-passwd"},
		{"../.troupe/team.toml", "troupe-team-toml"},
		{"a/b/c", "a-b-c"},
		{".hidden", "hidden"},
		{`..\..\x`, "x"},
		{strings.Repeat("long-", 30), strings.TrimSuffix(strings.Repeat("long-", 16), "-")},
	} {
		dir := project(t)
		n, err := s.Write(ctx, dir, Note{Name: tc.name, Description: "d", Type: "project"})
		if err != nil {
			t.Errorf("Write(%q): %v", tc.name, err)
			continue
		}
		if n.Name != tc.want || n.Path != filepath.Join(dir, ".troupe", "memory", tc.want+".md") {
			t.Errorf("Write(%q) saved %q at %s, want %q", tc.name, n.Name, n.Path, tc.want)
		}
		want := []string{".", ".troupe", ".troupe/memory", ".troupe/memory/" + tc.want + ".md"}
		if got := tree(t, dir); !slices.Equal(got, want) {
			t.Errorf("Write(%q) left %v, want %v", tc.name, got, want)
		}
		if got, err := s.Read(ctx, dir, tc.name); err != nil || got.Name != tc.want {
			t.Errorf("Read(%q) = %q, %v; want %q", tc.name, got.Name, err, tc.want)
		}
	}
	for _, name := range []string{"", "..", "/", "../..", "___", "日本語"} {
		dir := project(t)
		want := fmt.Sprintf(`write memory note: name: %q has no letter or digit: use 1 to 80 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit`, name)
		if _, err := s.Write(ctx, dir, Note{Name: name, Description: "d", Type: "project"}); err == nil || err.Error() != want {
			t.Errorf("Write(%q) = %v\nwant %s", name, err, want)
		}
		if got := tree(t, dir); !slices.Equal(got, []string{".", ".troupe"}) {
			t.Errorf("Write(%q) left %v", name, got)
		}
		if _, err := s.Read(ctx, dir, name); err == nil || !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("Read(%q) = %v, want an invalid-name error", name, err)
		}
	}
}

// TestSymlinkEscapes: a .troupe or .troupe/memory that leads outside the
// project is refused for every operation, and nothing is written there.
func TestSymlinkEscapes(t *testing.T) {
	ctx := t.Context()
	for _, link := range []string{".troupe/memory", ".troupe"} {
		t.Run(link, func(t *testing.T) {
			s := New(Options{})
			dir, outside := t.TempDir(), t.TempDir()
			put(t, outside, "memory/stolen.md", noteText("stolen", "outside", "secret\n"))
			put(t, outside, "stolen.md", noteText("stolen", "outside", "secret\n"))
			if err := os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755); err != nil {
				t.Fatal(err)
			}
			if link == ".troupe" {
				os.Remove(filepath.Join(dir, ".troupe"))
			}
			if err := os.Symlink(outside, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
				t.Fatal(err)
			}
			before := tree(t, outside)
			real, _ := filepath.EvalSymlinks(outside)
			want := link + " leads to " + real + ", outside the project: notes must stay inside the project, so make " + link + " a real directory: invalid"

			_, err := s.Write(ctx, dir, Note{Name: "x", Description: "d", Type: "project"})
			if err == nil || err.Error() != "write memory note x: "+want || !errors.Is(err, troupe.ErrInvalid) {
				t.Errorf("Write = %v\nwant write memory note x: %s", err, want)
			}
			if _, err := s.Read(ctx, dir, "stolen"); err == nil || err.Error() != "read memory note stolen: "+want {
				t.Errorf("Read = %v\nwant read memory note stolen: %s", err, want)
			}
			if notes, err := s.List(ctx, dir); err == nil || err.Error() != "list memory notes: "+want || notes != nil {
				t.Errorf("List = %v, %v\nwant list memory notes: %s", notes, err, want)
			}
			if _, err := s.Search(ctx, troupe.Project{ID: "p", Path: dir}, "secret", 10); err == nil {
				t.Error("Search through the symlink succeeded, want it refused")
			}
			if after := tree(t, outside); !slices.Equal(after, before) {
				t.Errorf("outside the project: %v, want %v untouched", after, before)
			}
		})
	}

	t.Run("relative symlink inside the project", func(t *testing.T) {
		s, dir := New(Options{}), project(t)
		if err := os.MkdirAll(filepath.Join(dir, "docs", "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../docs/notes", filepath.Join(dir, ".troupe", "memory")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(ctx, dir, Note{Name: "x", Description: "d", Type: "project"}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "docs", "notes", "x.md")); err != nil {
			t.Errorf("the note is not in docs/notes: %v", err)
		}
		if _, err := s.Read(ctx, dir, "x"); err != nil {
			t.Errorf("Read: %v", err)
		}
	})

	t.Run("absolute symlink inside the project", func(t *testing.T) {
		s, dir := New(Options{}), project(t)
		target := filepath.Join(dir, "docs", "notes")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, ".troupe", "memory")); err != nil {
			t.Fatal(err)
		}
		_, err := s.Write(ctx, dir, Note{Name: "x", Description: "d", Type: "project"})
		want := "write memory note x: .troupe/memory is a symlink to the absolute path " + target +
			": make it a relative symlink or a real directory: invalid"
		if err == nil || err.Error() != want {
			t.Errorf("Write = %v\nwant %s", err, want)
		}
	})

	t.Run("symlinked note", func(t *testing.T) {
		s, dir, outside := New(Options{}), project(t), t.TempDir()
		put(t, outside, "stolen.md", noteText("stolen", "outside", "secret\n"))
		put(t, dir, ".troupe/memory/good.md", noteText("good", "inside", "fine\n"))
		if err := os.Symlink(filepath.Join(outside, "stolen.md"), filepath.Join(dir, ".troupe", "memory", "stolen.md")); err != nil {
			t.Fatal(err)
		}
		want := ".troupe/memory/stolen.md: is a symbolic link: a note must be a regular file in .troupe/memory"
		if _, err := s.Read(ctx, dir, "stolen"); err == nil || err.Error() != "read memory note stolen: "+want {
			t.Errorf("Read = %v\nwant read memory note stolen: %s", err, want)
		}
		notes, err := s.List(ctx, dir)
		if len(notes) != 1 || notes[0].Name != "good" || err == nil || err.Error() != "list memory notes: "+want {
			t.Errorf("List = %v, %v; want [good] and %s", notes, err, want)
		}
		hits, err := s.Search(ctx, troupe.Project{ID: "p", Path: dir}, "secret", 10)
		if err != nil || len(hits) != 0 {
			t.Errorf("Search(secret) = %v, %v; want nothing from the symlinked file", hits, err)
		}
		// Writing the note replaces the link, not its target.
		if _, err := s.Write(ctx, dir, Note{Name: "stolen", Description: "mine now", Type: "project"}); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(filepath.Join(outside, "stolen.md")); !strings.Contains(string(data), "secret") {
			t.Errorf("Write went through the symlink: the outside file holds %q", data)
		}
	})
}

// TestWriteIsAtomic fails writes at each step and checks that the old note
// stays whole and no temporary file is left.
func TestWriteIsAtomic(t *testing.T) {
	ctx := t.Context()
	old := Note{Name: "n", Description: "old", Type: "project", Body: "old body\n"}
	for _, step := range []string{"written", "rename"} {
		t.Run(step, func(t *testing.T) {
			s, dir := New(Options{}), project(t)
			if _, err := s.Write(ctx, dir, old); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("disk on fire")
			s.hook = func(at string) error {
				if at == step {
					return boom
				}
				return nil
			}
			_, err := s.Write(ctx, dir, Note{Name: "n", Description: "new", Type: "project", Body: strings.Repeat("new body\n", 1000)})
			if !errors.Is(err, boom) {
				t.Fatalf("Write = %v, want the injected error", err)
			}
			got, err := s.Read(ctx, dir, "n")
			if err != nil || got.Description != "old" || got.Body != old.Body {
				t.Errorf("after a failed write, Read = %+v, %v; want the old note", got, err)
			}
			if got := files(t, dir); !slices.Equal(got, []string{"n.md"}) {
				t.Errorf("memory directory holds %v, want only n.md", got)
			}
		})
	}

	t.Run("rename fails", func(t *testing.T) {
		s, dir := New(Options{}), project(t)
		// A directory where the note should go: the rename fails for real.
		if err := os.MkdirAll(filepath.Join(dir, ".troupe", "memory", "n.md", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(ctx, dir, old); err == nil {
			t.Fatal("Write over a directory succeeded")
		}
		if got := files(t, dir); !slices.Equal(got, []string{"n.md"}) {
			t.Errorf("memory directory holds %v, want only the n.md directory", got)
		}
	})

	t.Run("concurrent writers", func(t *testing.T) {
		s, dir := New(Options{}), project(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := range 10 {
					body := strings.Repeat(fmt.Sprintf("writer %d round %d\n", i, j), 100*(i+1))
					if _, err := s.Write(ctx, dir, Note{Name: "n", Description: fmt.Sprintf("w%d", i), Type: "project", Body: body}); err != nil {
						t.Error(err)
					}
				}
			})
			wg.Go(func() {
				for range 20 {
					n, err := s.Read(ctx, dir, "n")
					if errors.Is(err, troupe.ErrNotFound) {
						continue
					}
					if err != nil {
						t.Errorf("Read during writes: %v", err)
						return
					}
					var w int
					fmt.Sscanf(n.Description, "w%d", &w)
					if !strings.HasPrefix(n.Body, fmt.Sprintf("writer %d ", w)) || len(n.Body)%100 != 0 {
						t.Errorf("Read during writes gave a mixed note: %s with %.30q…", n.Description, n.Body)
						return
					}
				}
			})
		}
		wg.Wait()
		if got := files(t, dir); !slices.Equal(got, []string{"n.md"}) {
			t.Errorf("memory directory holds %v, want only n.md", got)
		}
	})
}

func TestReadMissing(t *testing.T) {
	s, ctx := New(Options{}), t.Context()
	for _, dir := range []string{t.TempDir(), project(t)} {
		_, err := s.Read(ctx, dir, "nope")
		want := "read memory note nope: no note of this name (memory_search finds notes by their words): not found"
		if err == nil || err.Error() != want || !errors.Is(err, troupe.ErrNotFound) {
			t.Errorf("Read = %v, want %s", err, want)
		}
	}
	if _, err := s.Read(ctx, filepath.Join(t.TempDir(), "gone"), "x"); err == nil || errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Read in a missing project = %v, want an error other than not found", err)
	}
}

func TestListReportsBadNotes(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	put(t, dir, ".troupe/memory/good.md", noteText("good", "A good note", "body\n"))
	put(t, dir, ".troupe/memory/also-good.md", noteText("also-good", "Another", ""))
	put(t, dir, ".troupe/memory/no-front-matter.md", "# Just markdown\n")
	put(t, dir, ".troupe/memory/renamed.md", noteText("other-name", "Copied file", ""))
	put(t, dir, ".troupe/memory/Bad Name.md", noteText("bad-name", "d", ""))
	put(t, dir, ".troupe/memory/.good.md.tmp-0123", "partial")
	put(t, dir, ".troupe/memory/readme.txt", "not a note")
	if err := os.Mkdir(filepath.Join(dir, ".troupe", "memory", "dir.md"), 0o755); err != nil {
		t.Fatal(err)
	}

	notes, err := s.List(ctx, dir)
	var names []string
	for _, n := range notes {
		names = append(names, n.Name)
		if n.Body != "" {
			t.Errorf("List gave %s with a body", n.Name)
		}
	}
	if !slices.Equal(names, []string{"also-good", "good"}) {
		t.Errorf("List names = %v, want [also-good good]", names)
	}
	var ne *NotesError
	if !errors.As(err, &ne) {
		t.Fatalf("List error = %v, want a *NotesError", err)
	}
	var got []string
	for _, e := range ne.Errs {
		got = append(got, e.Error())
	}
	want := []string{
		`.troupe/memory/Bad Name.md: the file name is not a note name: rename it to bad-name.md`,
		`.troupe/memory/dir.md: is a directory: a note must be a regular file in .troupe/memory`,
		`.troupe/memory/no-front-matter.md:1: no front matter: a note starts with a line "---", then name, description and metadata.type, then a line "---"`,
		`.troupe/memory/renamed.md:2: name: "other-name" does not match the file name: rename the file to other-name.md, or the note to "renamed"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("bad notes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasSuffix(err.Error(), "; and 1 more bad notes") {
		t.Errorf("List error = %q, want it to count the bad notes not shown", err)
	}
	var fe *troupe.FieldError
	if !errors.As(err, &fe) {
		t.Errorf("List error does not hold *troupe.FieldErrors")
	}

	// The session's opening list names the good ones.
	wantText := "Memory notes of this project (read one with memory_read, search them with memory_search):\n" +
		"- also-good: Another\n- good: A good note\n"
	if got := IndexText(notes); got != wantText {
		t.Errorf("IndexText =\n%s\nwant\n%s", got, wantText)
	}
}

func TestListWithoutNotes(t *testing.T) {
	s := New(Options{})
	for _, dir := range []string{t.TempDir(), project(t)} {
		notes, err := s.List(t.Context(), dir)
		if err != nil || notes == nil || len(notes) != 0 {
			t.Errorf("List = %#v, %v; want an empty list", notes, err)
		}
	}
	if got := IndexText(nil); got != "" {
		t.Errorf("IndexText(nil) = %q, want empty", got)
	}
}

func TestIndexTextKeepsOneLinePerNote(t *testing.T) {
	got := IndexText([]Note{{Name: "a", Description: "line\nbreak"}})
	if strings.Count(got, "\n") != 2 || !strings.Contains(got, "- a: line break\n") {
		t.Errorf("IndexText = %q, want the description on one line", got)
	}
}

// countingIndex counts Updates.
type countingIndex struct {
	Index
	syncs atomic.Int64
}

func (c *countingIndex) Update(ctx context.Context, p troupe.ProjectID, put []Entry, drop []string) error {
	c.syncs.Add(1)
	return c.Index.Update(ctx, p, put, drop)
}

func TestSearchSyncsLazily(t *testing.T) {
	idx := &countingIndex{Index: NewMemIndex()}
	s, dir, ctx := New(Options{Index: idx}), project(t), t.Context()
	p := troupe.Project{ID: "p1", Path: dir}
	search := func(query string) []string {
		t.Helper()
		hits, err := s.Search(ctx, p, query, 10)
		if err != nil {
			t.Fatalf("Search(%q): %v", query, err)
		}
		var names []string
		for _, h := range hits {
			names = append(names, h.Note.Name)
		}
		return names
	}
	syncs := func(want int64) {
		t.Helper()
		if got := idx.syncs.Load(); got != want {
			t.Errorf("%d syncs, want %d", got, want)
		}
	}

	if got := search("probe"); len(got) != 0 {
		t.Errorf("Search in a project without notes = %v", got)
	}
	syncs(0) // nothing to index
	if _, err := s.Write(ctx, dir, Note{Name: "liveness", Description: "The liveness probe", Body: "activity token\n"}); err != nil {
		t.Fatal(err)
	}
	if got := search("probe"); !slices.Equal(got, []string{"liveness"}) {
		t.Errorf("Search(probe) after Write = %v", got)
	}
	syncs(1)
	search("token")
	search("activity")
	syncs(1) // nothing changed: no update

	// Edits by other hands (an agent's shell, the person's editor) are seen.
	put(t, dir, ".troupe/memory/liveness.md", noteText("liveness", "The liveness probe", "edited by hand: watchdog\n"))
	if got := search("watchdog"); !slices.Equal(got, []string{"liveness"}) {
		t.Errorf("Search(watchdog) after an edit = %v", got)
	}
	if got := search("token"); len(got) != 0 {
		t.Errorf("Search(token) after the edit removed it = %v", got)
	}
	put(t, dir, ".troupe/memory/added.md", noteText("added", "Added by hand", "watchdog too\n"))
	put(t, dir, ".troupe/memory/broken.md", "no front matter, watchdog\n")
	if got := search("watchdog"); !slices.Equal(got, []string{"added", "liveness"}) {
		t.Errorf("Search(watchdog) = %v, want [added liveness] and not the broken note", got)
	}
	if err := os.Remove(filepath.Join(dir, ".troupe", "memory", "liveness.md")); err != nil {
		t.Fatal(err)
	}
	if got := search("watchdog"); !slices.Equal(got, []string{"added"}) {
		t.Errorf("Search(watchdog) after a removal = %v", got)
	}
	if err := os.RemoveAll(filepath.Join(dir, ".troupe", "memory")); err != nil {
		t.Fatal(err)
	}
	if got := search("watchdog"); len(got) != 0 {
		t.Errorf("Search(watchdog) after removing the directory = %v", got)
	}

	// Two quick writes of the same size in the same clock tick are both seen.
	for _, word := range []string{"alpha", "bravo"} {
		if _, err := s.Write(ctx, dir, Note{Name: "quick", Description: "d", Body: word + "\n"}); err != nil {
			t.Fatal(err)
		}
		if got := search(word); !slices.Equal(got, []string{"quick"}) {
			t.Errorf("Search(%s) right after writing it = %v", word, got)
		}
	}
}

// TestSearchC1CopiedProject: a project and its cp -r are two projects with
// identical notes; each searches its own folder only (contract C1).
func TestSearchC1CopiedProject(t *testing.T) {
	s, ctx := New(Options{}), t.Context()
	a, b := project(t), project(t)
	for _, dir := range []string{a, b} {
		for _, n := range []Note{
			{Name: "liveness-probe", Description: "Activity token", Body: "The watchdog re-arms.\n"},
			{Name: "cross-talk", Description: "Keys", Body: "The watchdog was fine.\n"},
			{Name: "resume-policy", Description: "Never resume a live session", Body: "Fork it.\n"},
		} {
			if _, err := s.Write(ctx, dir, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	pa, pb := troupe.Project{ID: "pa", Path: a}, troupe.Project{ID: "pb", Path: b}
	if _, err := s.Write(ctx, b, Note{Name: "only-in-b", Description: "Copy only", Body: "watchdog in the copy\n"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, p := range []troupe.Project{pa, pb} {
		wg.Go(func() {
			for range 10 {
				hits, err := s.Search(ctx, p, "watchdog", 10)
				if err != nil {
					t.Error(err)
					return
				}
				want := 2
				if p.ID == "pb" {
					want = 3
				}
				if len(hits) != want {
					t.Errorf("Search(%s) = %d hits, want %d", p.ID, len(hits), want)
				}
				for _, h := range hits {
					if !strings.HasPrefix(h.Note.Path, p.Path+string(filepath.Separator)) {
						t.Errorf("Search(%s) returned %s, from another project", p.ID, h.Note.Path)
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestSearchAnyQuery(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	if _, err := s.Write(ctx, dir, Note{Name: "n", Description: "Liveness probe", Body: "watchdog\n"}); err != nil {
		t.Fatal(err)
	}
	p := troupe.Project{ID: "p", Path: dir}
	for _, q := range []string{`"probe`, `(probe AND`, `NOT`, `*`, `probe*`, `name:probe`, `""`, ``, `'`, `-probe`, `NEAR(a b)`} {
		hits, err := s.Search(ctx, p, q, 10)
		if err != nil || hits == nil {
			t.Errorf("Search(%q) = %v, %v; want hits (maybe none) and no error", q, hits, err)
		}
	}
	for _, limit := range []int{-5, 0, 1, 1000} {
		if _, err := s.Search(ctx, p, "probe", limit); err != nil {
			t.Errorf("Search(limit %d): %v", limit, err)
		}
	}
	if _, err := s.Search(ctx, troupe.Project{Path: dir}, "probe", 10); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("Search without a project id = %v, want invalid", err)
	}
}

func TestRemove(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	p := troupe.Project{ID: "p1", Path: dir}
	if _, err := s.Write(ctx, dir, Note{Name: "release-steps", Description: "how a release goes out", Body: "tag, then push\n"}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Search(ctx, p, "release", 5); err != nil || len(hits) != 1 {
		t.Fatalf("search before: %v, %v", hits, err)
	}
	// Its name as the person types it: sanitized as Read does.
	got, err := s.Remove(ctx, dir, "Release Steps")
	if err != nil || got.Name != "release-steps" || got.Body != "tag, then push\n" {
		t.Fatalf("Remove = %+v, %v; want the note as it was", got, err)
	}
	if f := files(t, dir); len(f) != 0 {
		t.Errorf("memory directory holds %v after the removal", f)
	}
	if hits, err := s.Search(ctx, p, "release", 5); err != nil || len(hits) != 0 {
		t.Errorf("search after the removal: %v, %v; want nothing", hits, err)
	}
	if _, err := s.Remove(ctx, dir, "release-steps"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("removing it again: %v; want not found", err)
	}
	if _, err := s.Remove(ctx, dir, "../../etc"); err == nil {
		t.Errorf("removing a path outside the notes: no error")
	}
	// A symlinked note is not followed: the file outside stays.
	outside := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(outside, []byte(noteText("secret", "d", "b")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, ".troupe", "memory", "secret.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(ctx, dir, "secret"); err == nil {
		t.Errorf("removing a symlinked note: no error")
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the file a symlinked note points to: %v", err)
	}
}
