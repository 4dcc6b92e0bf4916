package project

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// bounded runs f in a goroutine and fails the test, instead of hanging it,
// when f does not return in time: a read that blocks on a FIFO must fail
// by timeout if the code regresses.
func bounded[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not return within 20s: it blocks", what)
		var zero T
		return zero
	}
}

func makeBad(t *testing.T, kind, file string, limit int64) {
	t.Helper()
	os.RemoveAll(file)
	os.MkdirAll(filepath.Dir(file), 0o755)
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(file, 0o644)
	case "directory":
		err = os.Mkdir(file, 0o755)
	case "symlink outside":
		outside := filepath.Join(t.TempDir(), "secret")
		os.WriteFile(outside, []byte("x"), 0o644)
		err = os.Symlink(outside, file)
	case "symlink to /dev/null":
		err = os.Symlink("/dev/null", file)
	case "oversize":
		err = os.WriteFile(file, []byte("# "+strings.Repeat("x", int(2*limit))+"\n"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

var badKinds = []string{"fifo", "directory", "symlink outside", "symlink to /dev/null", "oversize"}

func badWant(kind string, limit int64) string {
	switch kind {
	case "fifo":
		return "is a named pipe (FIFO), not a regular file"
	case "directory":
		return "is a directory, not a regular file"
	case "symlink outside":
		return "is a symbolic link to /"
	case "symlink to /dev/null":
		return "is a symbolic link to /dev/null"
	}
	return map[int64]string{1 << 20: "is 2 MB, over the 1 MB limit", 256 << 10: "is 512 KB, over the 256 KB limit"}[limit]
}

// TestBadTeamFile: a team file that is not a regular file inside the
// project, or is too big, is a team error naming it and saying what it is;
// Add returns (no hang), and a good project next to it loads.
func TestBadTeamFile(t *testing.T) {
	for _, kind := range badKinds {
		t.Run(kind, func(t *testing.T) {
			r, err := Open(context.Background(), Options{Store: NewMemStore()})
			if err != nil {
				t.Fatal(err)
			}
			bad, good := t.TempDir(), t.TempDir()
			file := filepath.Join(bad, TeamFile)
			makeBad(t, kind, file, 1<<20)
			os.MkdirAll(filepath.Join(good, ".troupe"), 0o755)
			os.WriteFile(filepath.Join(good, TeamFile), []byte(leadHead), 0o644)

			info := bounded(t, "Add", func() Info {
				info, err := r.Add(context.Background(), bad)
				if err != nil {
					t.Error(err)
				}
				return info
			})
			want := file + ": the team file " + badWant(kind, 1<<20)
			if !strings.HasPrefix(info.TeamError, want) || !strings.Contains(info.TeamError, ": ") {
				t.Fatalf("team error = %q, want it to start with %q", info.TeamError, want)
			}
			if g, err := r.Add(context.Background(), good); err != nil || g.TeamError != "" || len(g.Team.Agents) != 1 {
				t.Fatalf("good project next to it: %+v, %v", g, err)
			}
			// And when the registry is opened again, as the daemon does at start.
			r2 := bounded(t, "Open", func() *Registry {
				r2, err := Open(context.Background(), Options{Store: r.store})
				if err != nil {
					t.Error(err)
				}
				return r2
			})
			if got, _ := r2.Get(info.ID); got.TeamError != info.TeamError {
				t.Fatalf("after Open: team error = %q, want %q", got.TeamError, info.TeamError)
			}
		})
	}
}

// TestBadPromptFile: a prompt_file that is not a regular file inside the
// project, or is too big, or is outside it, is a team error at load.
func TestBadPromptFile(t *testing.T) {
	kinds := append(badKinds, "absolute path outside")
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			prompt, want := "prompts/lead.md", ""
			if kind == "absolute path outside" {
				prompt = filepath.Join(t.TempDir(), "lead.md")
				os.WriteFile(prompt, []byte("You lead."), 0o644)
				want = "the prompt file is outside the project folder"
			} else {
				makeBad(t, kind, filepath.Join(dir, "prompts", "lead.md"), 256<<10)
				want = "the prompt file " + badWant(kind, 256<<10)
			}
			os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
			os.WriteFile(filepath.Join(dir, TeamFile), []byte(leadHead+"prompt_file = \""+prompt+"\"\n"), 0o644)
			r, err := Open(context.Background(), Options{Store: NewMemStore()})
			if err != nil {
				t.Fatal(err)
			}
			info := bounded(t, "Add", func() Info {
				info, err := r.Add(context.Background(), dir)
				if err != nil {
					t.Error(err)
				}
				return info
			})
			head := filepath.Join(dir, TeamFile) + `:4: agent "lead": prompt_file: `
			if !strings.HasPrefix(info.TeamError, head) || !strings.Contains(info.TeamError, want) {
				t.Fatalf("team error = %q, want %q ... %q", info.TeamError, head, want)
			}
		})
	}
}

// TestPromptFileInsideByAbsolutePath: an absolute prompt_file inside the
// project is read.
func TestPromptFileInsideByAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, "lead.md"), []byte("You lead."), 0o644)
	os.WriteFile(filepath.Join(dir, TeamFile), []byte(leadHead+"prompt_file = \""+filepath.Join(dir, "lead.md")+"\"\n"), 0o644)
	r, _ := Open(context.Background(), Options{Store: NewMemStore()})
	if info, err := r.Add(context.Background(), dir); err != nil || info.TeamError != "" {
		t.Fatalf("Add = %+v, %v", info, err)
	}
}

// TestAddRefusesRootAndPseudoFileSystems: "/" and the kernel's pseudo-file
// systems are not projects; a home folder is.
func TestAddRefusesRootAndPseudoFileSystems(t *testing.T) {
	r, _ := Open(context.Background(), Options{Store: NewMemStore()})
	for path, want := range map[string]string{
		"/":          "/ is the root of the file system, not a project",
		"/proc":      "/proc is in /proc, a file system the kernel makes up",
		"/proc/self": "a file system the kernel makes up",
		"/sys":       "/sys is in /sys",
		"/dev":       "/dev is in /dev",
	} {
		_, err := r.Add(context.Background(), path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "give the project's own folder") {
			t.Errorf("Add(%s) = %v, want it refused with %q", path, err, want)
		}
	}
	if len(r.List()) != 0 {
		t.Fatalf("registered: %+v", r.List())
	}
	if checkPlace(t.TempDir()) != nil {
		t.Fatal("a temporary folder refused")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		if err := checkPlace(home); err != nil {
			t.Fatalf("home refused: %v", err)
		}
	}
	_ = troupe.ErrInvalid
}
