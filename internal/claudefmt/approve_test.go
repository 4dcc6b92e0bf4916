package claudefmt

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Approve trusts a folder and approves a key's last 20 characters, keeps
// every other key, writes nothing the second time, and leaves a rejected
// key rejected.
func TestApprove(t *testing.T) {
	in := `{"numStartups":3,"projects":{"/other":{"allowedTools":["x"]},"/w":{"mcpServers":{}}},"customApiKeyResponses":{"approved":["old"],"rejected":["bad"]}}`
	key := "sk-ant-0123456789abcdefghijKLMNOPQRST"
	out, changed, err := Approve([]byte(in), Approval{Trust: "/w", APIKey: key})
	if err != nil || !changed {
		t.Fatalf("Approve: changed %v, %v", changed, err)
	}
	var cfg struct {
		NumStartups int                                   `json:"numStartups"`
		Projects    map[string]map[string]json.RawMessage `json:"projects"`
		Keys        struct{ Approved, Rejected []string } `json:"customApiKeyResponses"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.NumStartups != 3 || string(cfg.Projects["/w"]["hasTrustDialogAccepted"]) != "true" ||
		string(cfg.Projects["/w"]["mcpServers"]) != "{}" || strings.Join(strings.Fields(string(cfg.Projects["/other"]["allowedTools"])), "") != `["x"]` {
		t.Errorf("after Approve: %s", out)
	}
	if want := []string{"old", key[len(key)-20:]}; strings.Join(cfg.Keys.Approved, ",") != strings.Join(want, ",") || strings.Join(cfg.Keys.Rejected, ",") != "bad" {
		t.Errorf("keys %+v, want approved %v, rejected [bad]", cfg.Keys, want)
	}
	if again, changed, err := Approve(out, Approval{Trust: "/w", APIKey: key}); err != nil || changed || again != nil {
		t.Errorf("a second Approve: %s, changed %v, %v; want no change", again, changed, err)
	}
	if _, changed, err := Approve([]byte(in), Approval{APIKey: "bad"}); err != nil || changed {
		t.Errorf("a rejected key: changed %v, %v; want it left rejected", changed, err)
	}
	if out, changed, err := Approve(nil, Approval{Trust: "/w", APIKey: "test"}); err != nil || !changed || !strings.Contains(string(out), `"approved": [`) {
		t.Errorf("no file: %s, %v, %v", out, changed, err)
	}
	for _, bad := range []string{`[1]`, `{"projects":[]}`, `{"customApiKeyResponses":{"approved":"x"}}`, `{`} {
		if _, _, err := Approve([]byte(bad), Approval{Trust: "/w", APIKey: "k"}); err == nil {
			t.Errorf("Approve(%s) = nil error", bad)
		}
	}
	if _, _, err := Approve(make([]byte, MaxGlobalConfig+1), Approval{Trust: "/w"}); err == nil {
		t.Error("a file over the limit was rewritten")
	}
}

// The global file is beside the config folder, or in CLAUDE_CONFIG_DIR.
func TestGlobalConfigFile(t *testing.T) {
	env := map[string]string{"HOME": "/home/p"}
	get := func(k string) string { return env[k] }
	if p, err := GlobalConfigFile(get); err != nil || p != "/home/p/.claude.json" {
		t.Errorf("HOME: %q, %v", p, err)
	}
	env["CLAUDE_CONFIG_DIR"] = "/etc/cc"
	if p, err := GlobalConfigFile(get); err != nil || p != "/etc/cc/.claude.json" {
		t.Errorf("CLAUDE_CONFIG_DIR: %q, %v", p, err)
	}
}

// The CLI's lock: taken and left; a held one waited for, then refused; a
// stale one (a crashed holder's) taken over.
func TestLockGlobalConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), ".claude.json")
		unlock, err := LockGlobalConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path + ".lock"); err != nil || !fi.IsDir() {
			t.Fatalf("the lock folder: %v", err)
		}
		start := time.Now()
		if _, err := LockGlobalConfig(path); err == nil || time.Since(start) < lockWait {
			t.Errorf("a held lock: %v after %v, want an error after %v", err, time.Since(start), lockWait)
		}
		unlock()
		if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the lock is left: %v", err)
		}
		os.Mkdir(path+".lock", 0o700)
		old := time.Now().Add(-2 * lockStale)
		os.Chtimes(path+".lock", old, old)
		start = time.Now()
		unlock, err = LockGlobalConfig(path)
		if err != nil || time.Since(start) != 0 {
			t.Errorf("a stale lock: %v after %v, want it taken at once", err, time.Since(start))
		}
		unlock()
	})
}
