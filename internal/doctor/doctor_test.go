package doctor

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeCLI writes an executable shell script named name in dir.
func fakeCLI(t *testing.T, dir, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func byEngine(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Engine] = c
	}
	return m
}

// TestDoctorReportsEachEngine: a tested claude logged in by file, an
// untested codex with a key, no opencode at all; openai and fake need no
// CLI. The report says so, and a fix for each problem; no secret appears.
func TestDoctorReportsEachEngine(t *testing.T) {
	bin, home := t.TempDir(), t.TempDir()
	fakeCLI(t, bin, "claude", `echo "2.1.328 (Claude Code)"`)
	fakeCLI(t, bin, "codex", `echo "codex-cli 0.170.1"`)
	os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte(`{"secret":"hunter2"}`), 0o600)
	cs := Run(t.Context(), Options{Getenv: envOf(map[string]string{"PATH": bin, "HOME": home, "OPENAI_API_KEY": "sk-secret-value"})})
	m := byEngine(cs)
	if c := m["claude"]; !c.OK || c.Version != "2.1.328" || !c.VersionTested || c.Path != filepath.Join(bin, "claude") ||
		c.Login != "login in "+filepath.Join(home, ".claude", ".credentials.json") || len(c.Fixes) != 0 {
		t.Errorf("claude = %+v", c)
	}
	if c := m["codex"]; !c.OK || c.Version != "0.170.1" || c.VersionTested || c.Login != "OPENAI_API_KEY set" ||
		len(c.Fixes) != 1 || !strings.Contains(c.Fixes[0], "@openai/codex@0.171.0") {
		t.Errorf("codex = %+v", c)
	}
	if c := m["opencode"]; c.OK || c.Path != "" || !strings.Contains(strings.Join(c.Fixes, "|"), "npm install -g opencode-ai@1.18.33") ||
		c.Login != "OPENAI_API_KEY set" {
		t.Errorf("opencode = %+v", c)
	}
	if c := m["openai"]; !c.OK || !strings.Contains(c.Login, "base_url") || !strings.Contains(c.Login, "api_key_env") {
		t.Errorf("openai = %+v", c)
	}
	if c := m["fake"]; !c.OK {
		t.Errorf("fake = %+v", c)
	}
	var b bytes.Buffer
	if err := Table(&b, cs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"claude    yes", "2.1.328 (tested)", "0.170.1 (untested; tested: 0.171.0)", "opencode not found", "to fix:", "opencode: install with: npm install -g opencode-ai@1.18.33"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"hunter2", "sk-secret-value"} {
		if strings.Contains(out, secret) {
			t.Errorf("table shows a secret:\n%s", out)
		}
	}
	if err := Strict(cs); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "opencode") {
		t.Errorf("Strict = %v, want opencode named", err)
	}
}

// TestDoctorNothingInstalled: every CLI engine gets an install fix and a
// login fix; Strict fails; the report still lists all five and git.
func TestDoctorNothingInstalled(t *testing.T) {
	cs := Run(t.Context(), Options{Getenv: envOf(map[string]string{"PATH": t.TempDir(), "HOME": t.TempDir()})})
	if len(cs) != 6 {
		t.Fatalf("%d checks, want 5 engines and git", len(cs))
	}
	if g := byEngine(cs)["git"]; g.OK || !strings.Contains(strings.Join(g.Fixes, "|"), "install git 2.38 or newer") {
		t.Errorf("git = %+v", g)
	}
	c := byEngine(cs)["claude"]
	if c.OK || c.Login != "not set" || strings.Join(c.Fixes, "|") != "install with: npm install -g @anthropic-ai/claude-code@2.1.328|log in with: claude, then /login (or set ANTHROPIC_API_KEY)" {
		t.Errorf("claude = %+v", c)
	}
	if Strict(cs) == nil {
		t.Error("Strict = nil with nothing installed")
	}
}

// TestDoctorConfigDirsAndBadCLIs: CLAUDE_CONFIG_DIR and CODEX_HOME are
// where the logins are looked for; a CLI that hangs is cut at the timeout
// (its whole process group), one that fails or prints no version is
// reported with what it said.
func TestDoctorConfigDirsAndBadCLIs(t *testing.T) {
	bin, cfg, codexHome := t.TempDir(), t.TempDir(), t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command")
	}
	fakeCLI(t, bin, "claude", sleep+" 60 & wait")
	fakeCLI(t, bin, "codex", "echo 'codex: broken install' >&2; exit 3")
	fakeCLI(t, bin, "opencode", "echo 'no number here'")
	os.WriteFile(filepath.Join(cfg, ".credentials.json"), nil, 0o600)
	os.WriteFile(filepath.Join(codexHome, "auth.json"), nil, 0o600)
	start := time.Now()
	cs := Run(t.Context(), Options{Timeout: 200 * time.Millisecond,
		Getenv: envOf(map[string]string{"PATH": bin, "HOME": t.TempDir(), "CLAUDE_CONFIG_DIR": cfg, "CODEX_HOME": codexHome})})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v: the hanging CLI was not cut", took)
	}
	m := byEngine(cs)
	if c := m["claude"]; c.OK || !strings.Contains(strings.Join(c.Problems, "|"), "no answer within 200ms") || c.Login != "login in "+filepath.Join(cfg, ".credentials.json") {
		t.Errorf("claude = %+v", c)
	}
	if c := m["codex"]; c.OK || !strings.Contains(strings.Join(c.Problems, "|"), "codex: broken install") || !c.LoginOK {
		t.Errorf("codex = %+v", c)
	}
	if c := m["opencode"]; c.OK || !strings.Contains(strings.Join(c.Problems, "|"), `no version number in "no number here"`) {
		t.Errorf("opencode = %+v", c)
	}
}

// TestDoctorGitVersion: a git older than 2.38 (a fake one on PATH) is not
// ready, its problem names the version found and the one needed; 2.38.0
// and later are ready.
func TestDoctorGitVersion(t *testing.T) {
	bin := t.TempDir()
	fakeCLI(t, bin, "git", `echo "git version 2.30.2"`)
	c := byEngine(Run(t.Context(), Options{Getenv: envOf(map[string]string{"PATH": bin})}))["git"]
	if c.OK || c.Version != "2.30.2" || c.Path != filepath.Join(bin, "git") ||
		!strings.Contains(strings.Join(c.Problems, "|"), "git 2.30.2 is too old") || !strings.Contains(strings.Join(c.Problems, "|"), "git 2.38 or newer") {
		t.Errorf("old git = %+v", c)
	}
	var b bytes.Buffer
	Table(&b, []Check{c})
	if !strings.Contains(b.String(), "2.30.2 (needs 2.38 or newer)") || !strings.Contains(b.String(), "git: install git 2.38 or newer") {
		t.Errorf("table:\n%s", b.String())
	}
	for _, v := range []string{"2.38.0", "2.47.1", "3.0.0"} {
		fakeCLI(t, bin, "git", "echo 'git version "+v+"'")
		if c := byEngine(Run(t.Context(), Options{Getenv: envOf(map[string]string{"PATH": bin})}))["git"]; !c.OK || c.Version != v {
			t.Errorf("git %s = %+v", v, c)
		}
	}
	if versionAtLeast("2.37.99", MinGit) || !versionAtLeast("2.38.0-rc1", MinGit) {
		t.Error("versionAtLeast compares wrongly")
	}
}

// TestOpenAIServers: each openai agent's model server is probed with its
// key (never shown): reachable, refusing the key, unreachable, key unset.
func TestOpenAIServers(t *testing.T) {
	const key = "sk-doctor-secret"
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"data":[]}`))
	}))
	defer ok.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	env := envOf(map[string]string{"PATH": t.TempDir(), "HOME": t.TempDir(), "GOOD_KEY": key, "BAD_KEY": "sk-wrong"})
	run := func(eps ...Endpoint) Check {
		for _, c := range Run(t.Context(), Options{Getenv: env, OpenAI: eps, Timeout: 2 * time.Second}) {
			if c.Engine == "openai" {
				return c
			}
		}
		t.Fatal("no openai check")
		return Check{}
	}
	if c := run(Endpoint{Agent: "a", BaseURL: ok.URL + "/v1", KeyEnv: "GOOD_KEY", KeyApproved: true}); !c.OK || len(c.Problems) != 0 || !strings.Contains(c.Login, "1 of 1") {
		t.Errorf("reachable: %+v", c)
	}
	c := run(Endpoint{Agent: "a", BaseURL: ok.URL + "/v1", KeyEnv: "BAD_KEY", KeyApproved: true},
		Endpoint{Agent: "b", BaseURL: goneURL + "/v1"},
		Endpoint{Agent: "c", BaseURL: ok.URL + "/v1", KeyEnv: "UNSET_KEY", KeyApproved: true})
	if c.OK || len(c.Problems) != 3 || !strings.Contains(c.Problems[0], "refuses the key") ||
		!strings.Contains(c.Problems[1], "unreachable") || !strings.Contains(c.Problems[2], "UNSET_KEY is not set") {
		t.Errorf("failures: %+v", c)
	}
	for _, p := range append(c.Problems, c.Login) {
		if strings.Contains(p, key) || strings.Contains(p, "sk-wrong") {
			t.Errorf("a key is shown: %q", p)
		}
	}
}

// TestOpenAIKeyOnlyToApprovedEndpoint: a key goes only to an endpoint the
// person approved with it (C17); an endpoint of an unapproved team is
// probed without it, and the report says why in one line.
func TestOpenAIKeyOnlyToApprovedEndpoint(t *testing.T) {
	const key = "sk-doctor-secret"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Write([]byte(`{"data":[]}`))
	}))
	defer srv.Close()
	env := envOf(map[string]string{"PATH": t.TempDir(), "HOME": t.TempDir(), "GH_TOKEN": key})
	var c Check
	for _, x := range Run(t.Context(), Options{Getenv: env, Timeout: 2 * time.Second, OpenAI: []Endpoint{
		{Agent: "mole", BaseURL: srv.URL + "/v1", KeyEnv: "GH_TOKEN", Withheld: "this folder is not a registered project"}}}) {
		if x.Engine == "openai" {
			c = x
		}
	}
	if len(got) != 1 || got[0] != "" {
		t.Fatalf("Authorization headers the server saw: %q; want one probe without a key", got)
	}
	if c.OK || len(c.Problems) != 1 || !strings.Contains(c.Problems[0], "GH_TOKEN was not sent") || !strings.Contains(c.Problems[0], "not a registered project") {
		t.Fatalf("check = %+v; want the withheld key said in one line", c)
	}
}

func TestSandboxReport(t *testing.T) {
	c := Sandbox(SandboxInfo{Mechanism: "bubblewrap", Covers: "files, processes", Unsandboxed: []string{"open"}, Caps: "caps on (cgroup v1): memory, processes"})
	if !c.OK || !strings.Contains(c.Login, "bubblewrap: files, processes") || !strings.Contains(c.Login, "UNSANDBOXED: open") ||
		!strings.Contains(c.Login, "caps on (cgroup v1): memory, processes") || len(c.Problems) != 1 {
		t.Errorf("report %+v", c)
	}
	// Caps off: said with why, and no error (agents run without them).
	c = Sandbox(SandboxInfo{Mechanism: "bubblewrap", Caps: "caps off", CapsOff: []string{"memory", "processes"}, CapsWhy: "cgroup v2: memory and pids are not delegated"})
	if !c.OK || !strings.Contains(c.Login, "caps not in force: memory, processes") || !slices.ContainsFunc(c.Fixes, func(p string) bool {
		return strings.Contains(p, "for the memory and processes caps per agent: cgroup v2: memory and pids are not delegated")
	}) {
		t.Errorf("caps off: %+v", c)
	}
	c = Sandbox(SandboxInfo{Mechanism: "none", Why: "bubblewrap unusable"})
	if c.OK || len(c.Fixes) == 0 || !strings.Contains(c.Fixes[0], "apt-get install bubblewrap") || Strict([]Check{c}) == nil {
		t.Errorf("no mechanism: %+v, want not ready with the fix", c)
	}
}

// TestDoctorFindsMakeTools: a CLI off PATH that make tools installed is
// found in the tools folder (not ready: the daemon looks on PATH) with
// the fix that puts it on PATH.
func TestDoctorFindsMakeTools(t *testing.T) {
	home := t.TempDir()
	tools := filepath.Join(home, ".cache", "troupe-tools")
	var claude string
	for _, e := range engines {
		if e.name == "claude" {
			claude = filepath.Join(tools, e.tools)
		}
	}
	os.MkdirAll(filepath.Dir(claude), 0o755)
	fakeCLI(t, filepath.Dir(claude), "claude", `echo "2.1.328 (Claude Code)"`)
	m := byEngine(Run(t.Context(), Options{Getenv: envOf(map[string]string{"PATH": t.TempDir(), "HOME": home, "ANTHROPIC_API_KEY": "k"})}))
	c := m["claude"]
	if c.OK || c.Path != claude || c.Version != "2.1.328" || !strings.Contains(strings.Join(c.Problems, "|"), "not on PATH, but make tools installed it at "+claude) ||
		!strings.Contains(strings.Join(c.Fixes, "|"), "export PATH="+filepath.Dir(claude)+":$PATH") {
		t.Errorf("claude = %+v", c)
	}
	if c := m["codex"]; c.Path != "" || !strings.Contains(strings.Join(c.Problems, "|"), "not found on PATH") {
		t.Errorf("codex (not installed anywhere) = %+v", c)
	}
}

// TestToolsPathsAreTheMakefiles: where doctor looks for each CLI in the
// tools folder is where the Makefile's tools target installs it.
func TestToolsPathsAreTheMakefiles(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, l := range strings.Split(string(mk), "\n") {
		if k, v, ok := strings.Cut(l, ":="); ok && !strings.ContainsAny(k, "\t#") {
			vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	expand := func(s string) string {
		for range 5 {
			for k, v := range vars {
				s = strings.ReplaceAll(s, "$("+k+")", v)
			}
		}
		return s
	}
	for _, e := range engines {
		if e.tools == "" {
			continue
		}
		bin := expand(vars[strings.ToUpper(e.name)+"_BIN"])
		if want := "$(TOOLS)/" + e.tools; bin != want {
			t.Errorf("%s: the Makefile installs it at %s; doctor looks at %s", e.name, bin, want)
		}
	}
}
