package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, body := range []string{"first", "second, longer than the first", "3"} {
		if err := Write(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != body {
			t.Errorf("read %q, %v; want %q", b, err, body)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"f"}) {
		t.Errorf("folder holds %v, want only f", got)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write into a missing folder: %v, want fs.ErrNotExist", err)
	}
}

// TestFailedWriteKeepsTheOldFile fails a write at each step: the old file
// stays whole and no temporary file is left.
func TestFailedWriteKeepsTheOldFile(t *testing.T) {
	for _, step := range []string{"written", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if err := WriteIn(root, "f", []byte("old"), 0o644, Options{}); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("disk on fire")
			var seen []string
			err = WriteIn(root, "f", []byte(strings.Repeat("new", 1000)), 0o644, Options{Step: func(at string) error {
				seen = append(seen, at)
				if at == step {
					return boom
				}
				return nil
			}})
			if !errors.Is(err, boom) {
				t.Fatalf("write = %v, want the injected error (steps seen %v)", err, seen)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "old" {
				t.Errorf("after a failed write the file holds %q, want old", b)
			}
			if got := names(t, dir); !slices.Equal(got, []string{"f"}) {
				t.Errorf("folder holds %v, want only f", got)
			}
		})
	}
	t.Run("rename fails", func(t *testing.T) {
		dir := t.TempDir()
		// A folder with something in it where the file should go.
		if err := os.MkdirAll(filepath.Join(dir, "f", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, "f"), []byte("x"), 0o600); err == nil {
			t.Fatal("a write over a folder succeeded")
		}
		if got := names(t, dir); !slices.Equal(got, []string{"f"}) {
			t.Errorf("folder holds %v, want only the folder f", got)
		}
	})
}

func TestNoReplace(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(root, "sub/f", []byte("one"), 0o600, Options{NoReplace: true}); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(root, "sub/f", []byte("two"), 0o600, Options{NoReplace: true}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second write: %v, want fs.ErrExist", err)
	}
	// Created between the check and the link: the link refuses it.
	err = WriteIn(root, "sub/g", []byte("late"), 0o600, Options{NoReplace: true, Step: func(at string) error {
		if at == "rename" {
			return os.WriteFile(filepath.Join(dir, "sub", "g"), []byte("first"), 0o600)
		}
		return nil
	}})
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("write racing a creation: %v, want fs.ErrExist", err)
	}
	for f, want := range map[string]string{"f": "one", "g": "first"} {
		if b, _ := os.ReadFile(filepath.Join(dir, "sub", f)); string(b) != want {
			t.Errorf("%s holds %q, want %q", f, b, want)
		}
	}
	if got := names(t, filepath.Join(dir, "sub")); !slices.Equal(got, []string{"f", "g"}) {
		t.Errorf("folder holds %v, want f and g only", got)
	}
}

func TestWriteInStaysInside(t *testing.T) {
	dir := t.TempDir()
	inner := filepath.Join(dir, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(inner, "out")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(inner)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"../f", "out/f"} {
		if err := WriteIn(root, name, []byte("x"), 0o600, Options{}); err == nil {
			t.Errorf("%s: written outside the root", name)
		}
	}
	if got := names(t, dir); !slices.Equal(got, []string{"inner"}) {
		t.Errorf("outside folder holds %v", got)
	}
}
