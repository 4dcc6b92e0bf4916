// Package statedir locates the daemon's state directory and names the files
// in it, so the daemon and the CLI agree on where to find each other.
//
// Layout of <state>: troupe.db (the SQLite store), token (the API bearer
// token, 0600), addr (host:port of the running daemon, written once it
// listens), daemon.lock (held with flock by the running daemon; holds its
// pid). Pure functions, no state; any package may import it.
//
// Trust: the daemon and the CLI use a state dir only when it is owned by
// the current user and not writable by group or others (Check): otherwise
// another user could replace the addr file (and send the CLI, token and
// all, to a server of theirs) or the database. The API token is 32 random
// bytes (64 hex digits); a token file holding less is refused.
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
	"syscall"

	"github.com/troupe-dev/troupe/internal/atomicfile"
)

// TokenBytes is the number of random bytes in an API token; its file
// holds them in hex.
const TokenBytes = 32

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

// Check refuses a state dir that is not a directory, is not owned by the
// current user, or is writable by group or others, saying how to fix it. A
// missing dir fails with an error matching fs.ErrNotExist.
func (d Dir) Check() error {
	fi, err := os.Stat(string(d))
	if err != nil {
		return fmt.Errorf("check state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %s is not a directory: pass another --state-dir", string(d))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("state dir %s is owned by uid %d, not by you (uid %d): use a directory of your own (--state-dir)",
			string(d), st.Uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("state dir %s is writable by others (mode %04o): run chmod 700 %s", string(d), perm, string(d))
	}
	return nil
}

// ReadToken returns the API token. A token shorter than TokenBytes random
// bytes (in hex) is refused.
func (d Dir) ReadToken() (string, error) {
	b, err := os.ReadFile(d.TokenFile())
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token: %s is empty: delete it and restart the daemon", d.TokenFile())
	}
	if len(tok) < 2*TokenBytes {
		return "", fmt.Errorf("read token: %s holds %d characters, fewer than %d (%d random bytes in hex): delete it and restart the daemon to mint a new one",
			d.TokenFile(), len(tok), 2*TokenBytes, TokenBytes)
	}
	return tok, nil
}

// EnsureToken returns the API token, creating the file (0600) with a fresh
// random token when it does not exist. A token file readable by others is
// refused.
func (d Dir) EnsureToken() (string, error) {
	st, err := os.Stat(d.TokenFile())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b := make([]byte, TokenBytes)
		rand.Read(b)
		tok := hex.EncodeToString(b)
		if err := atomicfile.Write(d.TokenFile(), []byte(tok+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("write token: %w", err)
		}
		return tok, nil
	case err != nil:
		return "", fmt.Errorf("stat token: %w", err)
	case st.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("check token: %s is readable by other users (mode %v): run `chmod 600 %s`", d.TokenFile(), st.Mode().Perm(), d.TokenFile())
	}
	return d.ReadToken() // read back: a short token is refused
}
