package claudefmt

// Claude Code's global config file (~/.claude.json): the one change troupe
// makes to Claude's files. A sandboxed Claude Code cannot save it (it
// writes it through a lock folder and a temporary file beside it, in a
// HOME that is read-only there), so the answers troupe's terminal driver
// would give to its start dialogs are saved by troupe, outside the
// sandbox, before the CLI starts.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// GlobalConfigFile is Claude Code's global config file for the
// environment given by getenv: $CLAUDE_CONFIG_DIR/.claude.json when set,
// else $HOME/.claude.json (measured with strace on 2.1.328).
func GlobalConfigFile(getenv func(string) string) (string, error) {
	if d := getenv("CLAUDE_CONFIG_DIR"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("find Claude Code's config file: %w", err)
		}
		return filepath.Join(abs, ".claude.json"), nil
	}
	d, err := ConfigDir(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(d), ".claude.json"), nil
}

// Approval is what Approve saves: the working directory the person
// trusts, and the API key (the CLI stores its last 20 characters) the CLI
// may use; "" leaves a field alone.
type Approval struct {
	Trust  string // a working directory, symbolic links resolved
	APIKey string
}

// Config file limits: a file larger than MaxGlobalConfig is not
// rewritten; a lock older than lockStale was left by a crash (the CLI's
// own lock library refreshes a held one every few seconds); lockWait
// bounds the wait for a held one.
const (
	MaxGlobalConfig = 64 << 20
	lockStale       = 10 * time.Second
	lockWait        = 5 * time.Second
)

// Approve applies a to the contents b of Claude Code's global config
// file, as the CLI's dialogs would: projects[Trust].hasTrustDialogAccepted
// and the key's suffix in customApiKeyResponses.approved. A key the person
// rejected stays rejected; every other key of the file is kept. changed
// is false, and out nil, when b already says so. Empty b is an empty
// file. The caller holds LockGlobalConfig and replaces the file
// atomically.
func Approve(b []byte, a Approval) (out []byte, changed bool, err error) {
	if len(b) > MaxGlobalConfig {
		return nil, false, fmt.Errorf("approve in Claude Code's config: it is over %d MiB; troupe leaves it alone", MaxGlobalConfig>>20)
	}
	cfg := map[string]json.RawMessage{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, false, fmt.Errorf("approve in Claude Code's config: %w", err)
		}
	}
	if a.Trust != "" {
		c, err := trust(cfg, a.Trust)
		if err != nil {
			return nil, false, fmt.Errorf("approve in Claude Code's config: %w", err)
		}
		changed = changed || c
	}
	if a.APIKey != "" {
		c, err := approveKey(cfg, a.APIKey)
		if err != nil {
			return nil, false, fmt.Errorf("approve in Claude Code's config: %w", err)
		}
		changed = changed || c
	}
	if !changed {
		return nil, false, nil
	}
	out, err = json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, false, fmt.Errorf("encode Claude Code's config: %w", err)
	}
	return out, true, nil
}

// trust sets projects[dir].hasTrustDialogAccepted, keeping the rest.
func trust(cfg map[string]json.RawMessage, dir string) (bool, error) {
	projects := map[string]json.RawMessage{}
	if err := unmarshalIf(cfg["projects"], &projects); err != nil {
		return false, fmt.Errorf("projects: %w", err)
	}
	proj := map[string]json.RawMessage{}
	if err := unmarshalIf(projects[dir], &proj); err != nil {
		return false, fmt.Errorf("projects[%q]: %w", dir, err)
	}
	if string(proj["hasTrustDialogAccepted"]) == "true" {
		return false, nil
	}
	proj["hasTrustDialogAccepted"] = json.RawMessage("true")
	return true, setJSON(cfg, "projects", projects, dir, proj)
}

// approveKey adds the key's last 20 characters to
// customApiKeyResponses.approved, unless the person rejected it.
func approveKey(cfg map[string]json.RawMessage, key string) (bool, error) {
	suffix := key
	if r := []rune(key); len(r) > 20 {
		suffix = string(r[len(r)-20:])
	}
	var resp map[string]json.RawMessage
	if err := unmarshalIf(cfg["customApiKeyResponses"], &resp); err != nil {
		return false, fmt.Errorf("customApiKeyResponses: %w", err)
	}
	if resp == nil {
		resp = map[string]json.RawMessage{}
	}
	var approved, rejected []string
	if err := unmarshalIf(resp["approved"], &approved); err != nil {
		return false, fmt.Errorf("customApiKeyResponses.approved: %w", err)
	}
	if err := unmarshalIf(resp["rejected"], &rejected); err != nil {
		return false, fmt.Errorf("customApiKeyResponses.rejected: %w", err)
	}
	if slices.Contains(approved, suffix) || slices.Contains(rejected, suffix) {
		return false, nil
	}
	approved = append(approved, suffix)
	if rejected == nil {
		rejected = []string{}
	}
	for k, v := range map[string][]string{"approved": approved, "rejected": rejected} {
		b, err := json.Marshal(v)
		if err != nil {
			return false, err
		}
		resp[k] = b
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return false, err
	}
	cfg["customApiKeyResponses"] = b
	return true, nil
}

func unmarshalIf(b json.RawMessage, v any) error {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, v)
}

// setJSON stores inner under outer[innerKey] and outer under cfg[key].
func setJSON(cfg map[string]json.RawMessage, key string, outer map[string]json.RawMessage, innerKey string, inner map[string]json.RawMessage) error {
	b, err := json.Marshal(inner)
	if err != nil {
		return err
	}
	outer[innerKey] = b
	if b, err = json.Marshal(outer); err != nil {
		return err
	}
	cfg[key] = b
	return nil
}

// LockGlobalConfig takes the CLI's own lock on its global config file
// path: the folder path+".lock", made exclusively. A lock older than
// lockStale is a crashed holder's and is taken over; a held one is waited
// for, up to lockWait.
func LockGlobalConfig(path string) (unlock func(), err error) {
	dir := path + ".lock"
	deadline := time.Now().Add(lockWait)
	for {
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return func() { os.Remove(dir) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock Claude Code's config: %w", err)
		}
		if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > lockStale {
			os.Remove(dir)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock Claude Code's config: %s held for over %v: is a Claude Code stuck?", dir, lockWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
