package projfile

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// readBounded runs ReadIn in a goroutine and fails the test, rather than
// hanging it, when the read does not return in time: a regression that
// opens a FIFO blocking must fail by timeout.
func readBounded(t *testing.T, k Kind, dir, path string) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, _, err := k.ReadIn(dir, path)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s did not return within 10s: it blocks", path)
		return nil, nil
	}
}

// TestRefusesWhatIsNotARegularFileInside: each kind of bad file is a
// FieldError naming the file and what it is, and no read blocks.
func TestRefusesWhatIsNotARegularFileInside(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "dir"), 0o755)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "abs-out"))
	rel, _ := filepath.Rel(dir, filepath.Join(outside, "secret"))
	os.Symlink(rel, filepath.Join(dir, "rel-out"))
	os.Symlink("/dev/null", filepath.Join(dir, "devnull"))
	os.Symlink(outside, filepath.Join(dir, "outdir"))
	os.WriteFile(filepath.Join(dir, "big"), make([]byte, Prompt.Max+1), 0o644)
	// A socket path must be short: bind it from inside dir.
	wd, _ := os.Getwd()
	os.Chdir(dir)
	l, err := net.Listen("unix", "sock")
	os.Chdir(wd)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	cases := []struct{ name, want string }{
		{"fifo", "is a named pipe (FIFO), not a regular file"},
		{"sock", "is a socket, not a regular file"},
		{"dir", "is a directory, not a regular file"},
		{"abs-out", "is a symbolic link to " + filepath.Join(outside, "secret")},
		{"rel-out", "is a symbolic link to " + rel},
		{"devnull", "is a symbolic link to /dev/null"},
		{"outdir/secret", "a folder on its path may be a symbolic link leading outside the project"},
		{"big", "the prompt file is 262145 bytes, over the 256 KB limit: shorten it"},
		{"../" + filepath.Base(outside) + "/secret", "is outside the project folder"},
		{filepath.Join(outside, "secret"), "is outside the project folder"},
	}
	if err := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		cases = append(cases, struct{ name, want string }{"null", "is a character device, not a regular file"})
	} else {
		t.Logf("no device case: mknod: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := readBounded(t, Prompt, dir, tc.name)
			if err == nil {
				t.Fatalf("read %d bytes, want an error", len(data))
			}
			fe, ok := errors.AsType[*troupe.FieldError](err)
			if !ok {
				t.Fatalf("err = %v (%T), want a *troupe.FieldError", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(fe.File, filepath.Base(tc.name)) {
				t.Fatalf("err = %q, want it to name the file and say %q", err, tc.want)
			}
		})
	}
}

// TestFIFOSwappedInAfterTheStat: a FIFO put in place between the stat and
// the open is opened without waiting for a writer, and refused by fstat.
func TestFIFOSwappedInAfterTheStat(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "team.toml")
	os.WriteFile(file, []byte("[[agent]]\n"), 0o644)
	afterStat = func(string) {
		os.Remove(file)
		if err := syscall.Mkfifo(file, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterStat = nil })
	_, err := readBounded(t, Team, dir, "team.toml")
	if err == nil || !strings.Contains(err.Error(), "the team file is a named pipe (FIFO), not a regular file") {
		t.Fatalf("err = %v, want the FIFO refused", err)
	}
}

func TestReadsRegularFilesAndLinksInside(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "prompts"), 0o755)
	os.WriteFile(filepath.Join(dir, "prompts", "lead.md"), []byte("You lead."), 0o644)
	os.Symlink("prompts/lead.md", filepath.Join(dir, "link.md"))
	os.WriteFile(filepath.Join(dir, "exact"), make([]byte, Prompt.Max), 0o644)
	for _, p := range []string{"prompts/lead.md", "link.md", filepath.Join(dir, "prompts", "lead.md"), "./prompts/../link.md"} {
		data, err := readBounded(t, Prompt, dir, p)
		if err != nil || string(data) != "You lead." {
			t.Errorf("ReadIn(%s) = %q, %v; want the prompt", p, data, err)
		}
	}
	if data, err := readBounded(t, Prompt, dir, "exact"); err != nil || int64(len(data)) != Prompt.Max {
		t.Errorf("a file of exactly the cap: %d bytes, %v", len(data), err)
	}
	if _, err := readBounded(t, Prompt, dir, "missing.md"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{
		12: "12 bytes", 1 << 10: "1 KB", 256 << 10: "256 KB", 1 << 20: "1 MB", 3355443: "3.2 MB",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
