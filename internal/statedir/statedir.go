// Package statedir locates the daemon's state directory and names the files
// in it, so the daemon and the CLI agree on where to find each other.
//
// Layout of <state>: troupe.db (the SQLite store), token (the API bearer
// token, 0600), addr (host:port of the running daemon, written once it
// listens), daemon.lock (held with flock by the running daemon; holds its
// pid). Pure functions, no state; any package may import it.
package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Default returns $XDG_STATE_HOME/troupe, or ~/.local/state/troupe.
func Default() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "troupe"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find state dir: %w: set XDG_STATE_HOME or pass --state-dir", err)
	}
	return filepath.Join(home, ".local", "state", "troupe"), nil
}

// Dir is a state directory.
type Dir string

// DB is the path of the SQLite store.
func (d Dir) DB() string { return filepath.Join(string(d), "troupe.db") }

// TokenFile is the path of the API token.
func (d Dir) TokenFile() string { return filepath.Join(string(d), "token") }

// AddrFile is the path of the running daemon's address.
func (d Dir) AddrFile() string { return filepath.Join(string(d), "addr") }

// LockFile is the path of the daemon's lock.
func (d Dir) LockFile() string { return filepath.Join(string(d), "daemon.lock") }

// ReadToken returns the API token.
func (d Dir) ReadToken() (string, error) {
	b, err := os.ReadFile(d.TokenFile())
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// EnsureToken returns the API token, creating the file (0600) with a fresh
// random token when it does not exist. A token file readable by others is
// refused.
func (d Dir) EnsureToken() (string, error) {
	st, err := os.Stat(d.TokenFile())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b := make([]byte, 32)
		rand.Read(b)
		tok := hex.EncodeToString(b)
		if err := WriteFileAtomic(d.TokenFile(), []byte(tok+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("write token: %w", err)
		}
		return tok, nil
	case err != nil:
		return "", fmt.Errorf("stat token: %w", err)
	case st.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("check token: %s is readable by other users (mode %v): run `chmod 600 %s`", d.TokenFile(), st.Mode().Perm(), d.TokenFile())
	}
	tok, err := d.ReadToken()
	if err == nil && tok == "" {
		return "", fmt.Errorf("read token: %s is empty: delete it and restart the daemon", d.TokenFile())
	}
	return tok, err
}

// WriteFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
