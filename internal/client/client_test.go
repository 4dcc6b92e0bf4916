package client

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/statedir"
)

func TestFromStateDirTrustsOnlyAPrivateDir(t *testing.T) {
	dir := t.TempDir()
	d := statedir.Dir(dir)
	if _, err := FromStateDir(filepath.Join(dir, "none")); !errors.Is(err, ErrNotRunning) {
		t.Errorf("missing state dir: %v, want ErrNotRunning", err)
	}
	if _, err := FromStateDir(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("no addr file: %v, want ErrNotRunning", err)
	}
	if _, err := d.EnsureToken(); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(d.AddrFile(), []byte("127.0.0.1:1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := FromStateDir(dir)
	if err != nil || c.Base() != "http://127.0.0.1:1234" {
		t.Fatalf("private state dir: %v %v", c, err)
	}

	os.Chmod(dir, 0o777)
	_, err = FromStateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "writable by others (mode 0777): run chmod 700 "+dir) {
		t.Errorf("state dir 0777: %v, want a refusal saying to chmod", err)
	}
	os.Chmod(dir, 0o700)

	os.Chmod(d.AddrFile(), 0o666)
	if _, err := FromStateDir(dir); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("addr file 0666: %v, want a refusal", err)
	}
	os.Remove(d.AddrFile())
	other := filepath.Join(t.TempDir(), "addr")
	os.WriteFile(other, []byte("10.0.0.1:80\n"), 0o600)
	os.Symlink(other, d.AddrFile())
	if _, err := FromStateDir(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("addr file a symlink: %v, want a refusal", err)
	}
}
