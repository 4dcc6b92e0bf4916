package layout

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTracked is the largest file git may track outside a testdata folder:
// build output (a test binary, a benchmark tool) is megabytes, source is
// not.
const maxTracked = 1 << 20

// TestNoBuildOutputTracked: no tracked file outside testdata/ is over
// 1 MB, and none is an executable ELF file.
func TestNoBuildOutputTracked(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs on a clone, but git finds none: %v", err)
		}
		t.Skipf("not in a git checkout: %v", err) // a source archive has no index to check
	}
	top := strings.TrimSpace(string(root))
	out, err := exec.Command("git", "-C", top, "ls-files", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" || strings.Contains("/"+name, "/testdata/") {
			continue
		}
		path := filepath.Join(top, name)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if fi.Size() > maxTracked {
			t.Errorf("%s is tracked and %d bytes (over 1 MB): build output belongs in .gitignore, test data in a testdata folder", name, fi.Size())
		}
		head := make([]byte, 4)
		if f, err := os.Open(path); err == nil {
			f.Read(head)
			f.Close()
		}
		if bytes.Equal(head, []byte("\x7fELF")) {
			t.Errorf("%s is a tracked executable: build output belongs in .gitignore", name)
		}
	}
}
