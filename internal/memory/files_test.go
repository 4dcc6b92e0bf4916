package memory

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestBadNoteFilesNeverBlock: a note that is a FIFO, a socket, a directory,
// a symlink leading outside (or to /dev/null) or a file over the cap is left
// out and reported by List, refused by Read, and left out of Search; none of
// them makes a call hang (each runs under a bound, so a regression fails
// by timeout).
func TestBadNoteFilesNeverBlock(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	mem := filepath.Join(dir, ".troupe", "memory")
	put(t, dir, ".troupe/memory/good.md", noteText("good", "A good note", "watchdog\n"))
	outside := filepath.Join(t.TempDir(), "secret.md")
	os.WriteFile(outside, []byte(noteText("secret", "d", "")), 0o644)
	if err := syscall.Mkfifo(filepath.Join(mem, "fifo.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(mem, "dir.md"), 0o755)
	os.Symlink(outside, filepath.Join(mem, "out.md"))
	os.Symlink("/dev/null", filepath.Join(mem, "null.md"))
	os.WriteFile(filepath.Join(mem, "huge.md"), []byte(noteText("huge", "d", strings.Repeat("x", 2<<20))), 0o644)
	wd, _ := os.Getwd()
	os.Chdir(mem) // a socket path must be short
	l, err := net.Listen("unix", "sock.md")
	os.Chdir(wd)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	within := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not return within 20s: it blocks", what)
		}
	}
	want := map[string]string{
		"dir":  ".troupe/memory/dir.md: is a directory: a note must be a regular file in .troupe/memory",
		"fifo": ".troupe/memory/fifo.md: is a named pipe (FIFO): a note must be a regular file in .troupe/memory",
		"huge": ".troupe/memory/huge.md: note is 2097212 bytes, more than the limit of 1048576: split it into several notes",
		"null": ".troupe/memory/null.md: is a symbolic link: a note must be a regular file in .troupe/memory",
		"out":  ".troupe/memory/out.md: is a symbolic link: a note must be a regular file in .troupe/memory",
		"sock": ".troupe/memory/sock.md: is a socket: a note must be a regular file in .troupe/memory",
	}
	within("List", func() {
		notes, err := s.List(ctx, dir)
		if len(notes) != 1 || notes[0].Name != "good" {
			t.Errorf("List = %+v, want the good note alone", notes)
		}
		ne, ok := errors.AsType[*NotesError](err)
		if !ok {
			t.Fatalf("List error = %v, want a *NotesError", err)
		}
		var got, exp []string
		for _, e := range ne.Errs {
			got = append(got, e.Error())
		}
		for _, w := range want {
			exp = append(exp, w)
		}
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Errorf("bad notes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
		}
	})
	for name, w := range want {
		within("Read "+name, func() {
			if _, err := s.Read(ctx, dir, name); err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Read(%s) = %v, want %q", name, err, w)
			}
		})
	}
	within("Search", func() {
		hits, err := s.Search(ctx, troupe.Project{ID: "p1", Path: dir}, "watchdog", 10)
		if err != nil || len(hits) != 1 || hits[0].Note.Name != "good" {
			t.Errorf("Search = %+v, %v; want the good note", hits, err)
		}
	})
}

// TestWriteRefusesNameCollisions: a name that sanitizes to an existing
// note's file is refused, naming that note, and the note is kept; the
// note's own name replaces it.
func TestWriteRefusesNameCollisions(t *testing.T) {
	s, dir, ctx := New(Options{}), project(t), t.Context()
	if _, err := s.Write(ctx, dir, Note{Name: "liveness-probe", Description: "first", Body: "one\n"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Liveness Probe", "liveness probe", "LIVENESS-PROBE", "liveness--probe"} {
		_, err := s.Write(ctx, dir, Note{Name: name, Description: "second", Body: "two\n"})
		want := `it becomes liveness-probe, the name of an existing note (.troupe/memory/liveness-probe.md), which it would replace: to replace that note, write it with the name "liveness-probe"`
		if !errors.Is(err, troupe.ErrAlreadyExists) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), name) {
			t.Errorf("Write(%q) = %v, want %q", name, err, want)
		}
	}
	if n, err := s.Read(ctx, dir, "liveness-probe"); err != nil || n.Description != "first" {
		t.Fatalf("note after collisions = %+v, %v; want the first one kept", n, err)
	}
	if got := tree(t, dir); !slices.Equal(got, []string{".", ".troupe", ".troupe/memory", ".troupe/memory/liveness-probe.md"}) {
		t.Errorf("left %v", got)
	}
	// Its own name replaces it; a new name that sanitizes to a free file is written.
	if _, err := s.Write(ctx, dir, Note{Name: "liveness-probe", Description: "replaced", Body: "three\n"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Read(ctx, dir, "liveness-probe"); err != nil || n.Description != "replaced" {
		t.Fatalf("after a write under its own name: %+v, %v", n, err)
	}
	if n, err := s.Write(ctx, dir, Note{Name: "Activity Token", Description: "d"}); err != nil || n.Name != "activity-token" {
		t.Fatalf("Write(Activity Token) = %+v, %v", n, err)
	}
}
