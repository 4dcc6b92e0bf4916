package statedir

import (
	"os"
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
