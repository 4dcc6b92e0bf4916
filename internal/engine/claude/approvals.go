package claude

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/claudefmt"
)

// saveApprovals saves in Claude Code's global config file the answers the
// terminal driver gives to the TUI's trust and API-key dialogs (tuiDialogs)
// for working directory cwd and the CLI's environment env. In troupe's
// sandbox the CLI cannot save that file itself (HOME is read-only there,
// and it writes the file through a lock folder and a temporary file
// beside it): without this, every start asks again and, the key's
// approval lost, the CLI can later say "Not logged in". troupe writes it
// from outside the sandbox, under the CLI's own lock.
func saveApprovals(env []string, cwd string) error {
	get := func(k string) string { v, _ := lookup(env, k); return v }
	path, err := claudefmt.GlobalConfigFile(get)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	unlock, err := claudefmt.LockGlobalConfig(path)
	if err != nil {
		return err
	}
	defer unlock()
	b, mode, err := readConfig(path)
	if err != nil {
		return err
	}
	out, changed, err := claudefmt.Approve(b, claudefmt.Approval{Trust: cwd, APIKey: get("ANTHROPIC_API_KEY")})
	if err != nil || !changed {
		return err
	}
	if err := atomicfile.Write(path, out, mode); err != nil {
		return fmt.Errorf("save Claude Code's config %s: %w", path, err)
	}
	return nil
}

// readConfig reads a regular file of at most claudefmt.MaxGlobalConfig+1
// bytes (Approve refuses more), and its mode; nothing and 0600 when there
// is no file.
func readConfig(path string) ([]byte, fs.FileMode, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o600, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read Claude Code's config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("read Claude Code's config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("read Claude Code's config: %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, claudefmt.MaxGlobalConfig+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read Claude Code's config: %w", err)
	}
	return b, fi.Mode().Perm(), nil
}
