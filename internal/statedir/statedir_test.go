package statedir

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureTokenCreatesAPrivateFileAndKeepsIt(t *testing.T) {
	d := Dir(t.TempDir())
	tok, err := d.EnsureToken()
	if err != nil || len(tok) != 64 {
		t.Fatalf("token %q, %v", tok, err)
	}
	st, _ := os.Stat(d.TokenFile())
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", st.Mode().Perm())
	}
	again, err := d.EnsureToken()
	if err != nil || again != tok {
		t.Fatalf("second EnsureToken = %q, %v; want the same token", again, err)
	}
}

func TestEnsureTokenRefusesAFileOthersCanRead(t *testing.T) {
	d := Dir(t.TempDir())
	os.WriteFile(d.TokenFile(), []byte("abc\n"), 0o644)
	os.Chmod(d.TokenFile(), 0o644)
	_, err := d.EnsureToken()
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable token: %v, want a refusal saying how to fix it", err)
	}
	os.WriteFile(d.TokenFile(), nil, 0o600)
	os.Chmod(d.TokenFile(), 0o600)
	if _, err := d.EnsureToken(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty token file: %v", err)
	}
}

func TestDefaultFollowsXDGStateHome(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if d, _ := Default(); d != "/x/state/troupe" {
		t.Fatalf("Default = %s", d)
	}
	t.Setenv("XDG_STATE_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/u")
	if d, _ := Default(); d != "/home/u/.local/state/troupe" {
		t.Fatalf("Default with a relative XDG_STATE_HOME = %s, want the HOME default", d)
	}
}

func TestCheckRefusesADirOthersCanWrite(t *testing.T) {
	d := t.TempDir()
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o700, true}, {0o755, true}, {0o770, false}, {0o777, false}, {0o1777, false}} {
		os.Chmod(d, c.mode)
		err := Dir(d).Check()
		if c.ok != (err == nil) {
			t.Errorf("mode %v: %v", c.mode, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "writable by others") || !strings.HasSuffix(err.Error(), ": run chmod 700 "+d)) {
			t.Errorf("mode %v: %v, want a refusal with the chmod to run", c.mode, err)
		}
	}
	os.Chmod(d, 0o777)
	if err := Dir(d).Check(); err == nil || err.Error() != "state dir "+d+" is writable by others (mode 0777): run chmod 700 "+d {
		t.Errorf("0777: %v", err)
	}
	os.Chmod(d, 0o700)
	if err := Dir(filepath.Join(d, "missing")).Check(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v, want fs.ErrNotExist", err)
	}
	f := filepath.Join(d, "file")
	os.WriteFile(f, nil, 0o600)
	if err := Dir(f).Check(); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file: %v", err)
	}
}

func TestTokensAreThirtyTwoRandomBytesAndShortOnesAreRefused(t *testing.T) {
	d := Dir(t.TempDir())
	tok, err := d.EnsureToken()
	if b, herr := hex.DecodeString(tok); err != nil || herr != nil || len(b) != TokenBytes || TokenBytes < 32 {
		t.Fatalf("token %q (%v, %v): want %d random bytes in hex, at least 32", tok, err, herr, TokenBytes)
	}
	short := strings.Repeat("ab", 31)
	os.WriteFile(d.TokenFile(), []byte(short+"\n"), 0o600)
	if _, err := d.EnsureToken(); err == nil || !strings.Contains(err.Error(), "delete it and restart the daemon") {
		t.Fatalf("a 31-byte token: %v, want a refusal", err)
	}
	if _, err := d.ReadToken(); err == nil {
		t.Fatal("ReadToken took a 31-byte token")
	}
}
