// Package doctor checks, for each engine troupe drives (claude, codex,
// opencode, openai, fake), and for git (agents with workspace = "worktree"
// need git 2.38 or newer), what the machine offers it: the engine's CLI on
// PATH and its version (from `<cli> --version`, run with a short timeout in
// its own process group), whether troupe is tested with that version,
// whether a login or an API key is present, and a one-line fix for what is
// missing; for the openai agents of the project it runs in (Options.OpenAI,
// from the team file), whether each one's model server answers (GET
// base_url/models, bounded by the timeout) and its key's variable is set.
// `troupe doctor` prints the report; it runs in the CLI process, no daemon
// needed.
//
// Secrets are never read or printed: an API key variable is reported as
// set or not set, a login file only as present (it is stat'ed, never
// opened).
//
// Concurrency: Run checks the engines one after the other and owns the
// --version processes it starts (each killed with its group at the
// timeout, always waited for). It imports only the standard library; the
// daemon, the runtime and the store are none of its business.
package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
)

// Options configures Run; zero values mean the real machine.
type Options struct {
	// Getenv reads the environment (PATH, HOME, the API key variables,
	// CLAUDE_CONFIG_DIR, CODEX_HOME, XDG_DATA_HOME); default os.LookupEnv.
	Getenv func(string) (string, bool)
	// Timeout bounds each `--version` run and each model server probe;
	// default 5s.
	Timeout time.Duration
	// OpenAI are the openai agents of the project the CLI runs in (from
	// its team file): each one's model server is probed (GET
	// base_url/models) and its api_key_env looked up.
	OpenAI []Endpoint
	// HTTPClient probes the model servers; default one of its own.
	HTTPClient *http.Client
	// ToolsDir is where `make tools` installs the tested CLIs, each
	// looked for there when it is not on PATH; default
	// $HOME/.cache/troupe-tools (the Makefile's TOOLS).
	ToolsDir string
}

// Endpoint is an openai agent's model server.
type Endpoint struct {
	Agent   string
	BaseURL string // up to /v1
	// KeyEnv is the variable that holds its key ("" for none);
	// KeyInAgentEnv whether the agent's env table sets it.
	KeyEnv        string
	KeyInAgentEnv bool
	// KeyApproved says that the person approved this BaseURL with this
	// KeyEnv (the project's approved team has the pair, C17): only then
	// is the key sent. Otherwise the server is probed without it, and
	// Withheld says why in one line.
	KeyApproved bool
	Withheld    string
}

// Check is the report on one engine.
type Check struct {
	Engine string `json:"engine"`
	// CLI is the command looked up on PATH; empty for engines without one.
	CLI  string `json:"cli,omitempty"`
	Path string `json:"path,omitempty"` // where it was found; empty when not
	// Version is what `<cli> --version` said; Tested the version troupe is
	// tested with, and VersionTested whether they are the same.
	Version       string `json:"version,omitempty"`
	Tested        string `json:"tested_version,omitempty"`
	VersionTested bool   `json:"version_tested"`
	// Needs is the oldest version that works, for a tool troupe needs at
	// a minimum version rather than at a tested one (git).
	Needs string `json:"needs,omitempty"`
	// Login says where the engine's credentials come from ("ANTHROPIC_API_KEY
	// set", "login in ~/.claude/.credentials.json"), or "not set".
	Login   string `json:"login"`
	LoginOK bool   `json:"login_ok"`
	// OK: the engine can run here (CLI found and a login present).
	OK bool `json:"ok"`
	// Problems say what is wrong, Fixes what to do, one line each.
	Problems []string `json:"problems,omitempty"`
	Fixes    []string `json:"fixes,omitempty"`
}

// engine is what doctor knows of one engine.
type engine struct {
	name    string
	cli     string // default command on PATH; "" for none
	tools   string // where `make tools` puts it, in ToolsDir (the Makefile's *_BIN)
	tested  string // version troupe is tested with; "" for untested
	install string // the one-line install fix
	login   func(o Options, c *Check)
}

// The engines, in the order the report lists them. Versions and login
// facts are in docs/engines/claude-code.md and docs/engines/codex-opencode.md
// ("Install and versions", "Environment", "Config files").
var engines = []engine{
	{name: "claude", cli: "claude", tested: "2.1.328", tools: "claude-code-2.1.328/node_modules/.bin/claude",
		install: "install with: npm install -g @anthropic-ai/claude-code@2.1.328", login: claudeLogin},
	{name: "codex", cli: "codex", tested: "0.171.0", tools: "codex-0.171.0/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
		install: "install with: npm install -g @openai/codex@0.171.0", login: codexLogin},
	{name: "opencode", cli: "opencode", tested: "1.18.33", tools: "opencode-1.18.33/node_modules/opencode-linux-x64/bin/opencode",
		install: "install with: npm install -g opencode-ai@1.18.33", login: opencodeLogin},
	{name: "openai", login: openaiServers},
	{name: "fake", login: func(_ Options, c *Check) {
		c.Login, c.LoginOK = "none needed (built in)", true
	}},
}

// openaiServers checks the model server of each openai agent of the
// project: reachable (any HTTP answer; a 401 or 403 says the key is
// refused), and its key's variable set. The key is sent only to an
// endpoint approved with it (Endpoint.KeyApproved), never shown.
func openaiServers(o Options, c *Check) {
	if len(o.OpenAI) == 0 {
		c.Login, c.LoginOK = "per agent: base_url and api_key_env in [agent.openai] (no openai agent in this folder's team)", true
		return
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	ok := 0
	for _, ep := range o.OpenAI {
		key, withheld := "", false
		if ep.KeyEnv != "" && !ep.KeyInAgentEnv && !ep.KeyApproved {
			// Never a secret to an endpoint the person has not approved.
			withheld = true
			why := fmt.Sprintf("agent %s: the key in %s was not sent to %s: %s", ep.Agent, ep.KeyEnv, ep.BaseURL, ep.Withheld)
			c.Problems = append(c.Problems, why)
			c.Fixes = append(c.Fixes, why+"; if you trust this team, register the folder (troupe project add) or approve its change (troupe team diff, troupe team approve), then run troupe doctor again")
		} else if ep.KeyEnv != "" && !ep.KeyInAgentEnv {
			v, set := o.Getenv(ep.KeyEnv)
			if !set || v == "" {
				c.Problems = append(c.Problems, fmt.Sprintf("agent %s: api_key_env %s is not set", ep.Agent, ep.KeyEnv))
				c.Fixes = append(c.Fixes, fmt.Sprintf("export %s before troupe serve, or set it in the agent's env", ep.KeyEnv))
				continue
			}
			key = v
		}
		if err := probe(o, hc, ep.BaseURL, key); err != nil && !withheld {
			c.Problems = append(c.Problems, fmt.Sprintf("agent %s: %s: %v", ep.Agent, ep.BaseURL, err))
			c.Fixes = append(c.Fixes, "start the model server (llama-server, vllm serve, ollama serve) or correct base_url in [agent.openai]")
			continue
		} else if err != nil && strings.HasPrefix(err.Error(), "unreachable") {
			c.Problems = append(c.Problems, fmt.Sprintf("agent %s: %s: %v", ep.Agent, ep.BaseURL, err))
			continue
		}
		if !withheld {
			ok++
		}
	}
	c.Login = fmt.Sprintf("%d of %d openai agents' model servers reachable", ok, len(o.OpenAI))
	c.LoginOK = ok == len(o.OpenAI)
}

// probe asks a model server for its models with a bounded wait.
func probe(o Options, hc *http.Client, base, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/models", nil)
	if err != nil {
		return fmt.Errorf("bad base_url: %v", err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		msg := err.Error()
		if key != "" {
			msg = strings.ReplaceAll(msg, key, "[key redacted]")
		}
		return fmt.Errorf("unreachable: %s", msg)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("reachable, but it refuses the key (%s)", resp.Status)
	}
	return nil
}

// Run checks every engine.
func Run(ctx context.Context, o Options) []Check {
	if o.Getenv == nil {
		o.Getenv = os.LookupEnv
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.ToolsDir == "" && home(o) != "" {
		o.ToolsDir = filepath.Join(home(o), ".cache", "troupe-tools")
	}
	out := make([]Check, 0, len(engines))
	for _, e := range engines {
		out = append(out, check(ctx, o, e))
	}
	return append(out, checkGit(ctx, o))
}

// MinGit is the oldest git that agents with workspace = "worktree" work
// with: merging checks with `git merge-tree --write-tree` (git 2.38). The
// same as worktree.MinGit (this package imports only the standard
// library).
const MinGit = "2.38"

// checkGit reports the git on PATH, which workspace = "worktree" needs at
// MinGit or newer.
func checkGit(ctx context.Context, o Options) Check {
	c := Check{Engine: "git", CLI: "git", Needs: MinGit + " or newer", Login: `none needed (used by workspace = "worktree")`, LoginOK: true}
	path, _ := o.Getenv("PATH")
	p, err := lookPath("git", path)
	if err != nil {
		c.Problems = append(c.Problems, "git not found on PATH")
		c.Fixes = append(c.Fixes, "install git "+MinGit+" or newer (needed only by agents with workspace = \"worktree\")")
		return c
	}
	c.Path = p
	v, err := version(ctx, o, p)
	if err != nil {
		c.Problems = append(c.Problems, fmt.Sprintf("%s --version: %v", p, err))
		c.Fixes = append(c.Fixes, "reinstall git "+MinGit+" or newer")
		return c
	}
	c.Version = v
	if !versionAtLeast(v, MinGit) {
		c.Problems = append(c.Problems, fmt.Sprintf("git %s is too old: workspace = \"worktree\" needs git %s or newer (git merge-tree --write-tree)", v, MinGit))
		c.Fixes = append(c.Fixes, "install git "+MinGit+" or newer (needed only by agents with workspace = \"worktree\")")
		return c
	}
	c.VersionTested, c.OK = true, true
	return c
}

// versionAtLeast compares the numbers of v and min part by part (a
// missing part is 0; a suffix such as -rc1 is ignored).
func versionAtLeast(v, min string) bool {
	num := func(s string) [3]int {
		var n [3]int
		s, _, _ = strings.Cut(s, "-")
		for i, f := range strings.SplitN(s, ".", 3) {
			n[i], _ = strconv.Atoi(f)
		}
		return n
	}
	a, b := num(v), num(min)
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func check(ctx context.Context, o Options, e engine) Check {
	c := Check{Engine: e.name, CLI: e.cli, Tested: e.tested}
	cliOK := true
	if e.cli != "" {
		cliOK = false
		path, _ := o.Getenv("PATH")
		p, err := lookPath(e.cli, path)
		switch tool := toolPath(o, e); {
		case err != nil && tool != "":
			// Installed by make tools, off PATH: the daemon would not
			// find it. Its version is still told.
			c.Path = tool
			c.Version, _ = version(ctx, o, tool)
			c.VersionTested = c.Version == e.tested
			c.Problems = append(c.Problems, fmt.Sprintf("%s is not on PATH, but make tools installed it at %s", e.cli, tool))
			c.Fixes = append(c.Fixes, fmt.Sprintf("put it on PATH: export PATH=%s:$PATH (in ~/.profile too; for troupe service, run troupe service install again from that shell)", filepath.Dir(tool)))
		case err != nil:
			c.Problems = append(c.Problems, fmt.Sprintf("%s not found on PATH", e.cli))
			c.Fixes = append(c.Fixes, e.install)
		default:
			c.Path = p
			v, err := version(ctx, o, p)
			switch {
			case err != nil:
				c.Problems = append(c.Problems, fmt.Sprintf("%s --version: %v", p, err))
				c.Fixes = append(c.Fixes, "reinstall: "+strings.TrimPrefix(e.install, "install with: "))
			default:
				cliOK = true
				c.Version = v
				c.VersionTested = v == e.tested
				if !c.VersionTested {
					c.Problems = append(c.Problems, fmt.Sprintf("version %s is not the one troupe is tested with (%s)", v, e.tested))
					c.Fixes = append(c.Fixes, "for the tested version: "+strings.TrimPrefix(e.install, "install with: "))
				}
			}
		}
	}
	e.login(o, &c)
	c.OK = cliOK && c.LoginOK
	return c
}

// toolPath is where make tools installed e's CLI, when it did; "" when not.
func toolPath(o Options, e engine) string {
	if e.tools == "" || o.ToolsDir == "" {
		return ""
	}
	p := filepath.Join(o.ToolsDir, filepath.FromSlash(e.tools))
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return p
	}
	return ""
}

// lookPath finds an executable regular file named name in the directories
// of path (a PATH value).
func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fs.ErrNotExist
}

var versionRE = regexp.MustCompile(`\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?`)

// version runs `p --version` in its own process group, killed with its
// group at the timeout, and returns the first version number it printed.
func version(ctx context.Context, o Options, p string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := o.Getenv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("no answer within %v", o.Timeout)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, firstLine(out.String()))
	}
	v := versionRE.FindString(out.String())
	if v == "" {
		return "", fmt.Errorf("no version number in %q", firstLine(out.String()))
	}
	return v, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s, _ = clip.Ellipsis(s, 120)
	return s
}

// home is HOME, or "" when unset.
func home(o Options) string {
	h, _ := o.Getenv("HOME")
	return h
}

// envSet reports the first of names that is set and not empty.
func envSet(o Options, names ...string) string {
	for _, n := range names {
		if v, ok := o.Getenv(n); ok && v != "" {
			return n
		}
	}
	return ""
}

// fileIn reports whether dir/name exists (stat only: never opened).
func fileIn(dir, name string) (string, bool) {
	if dir == "" {
		return "", false
	}
	p := filepath.Join(dir, name)
	_, err := os.Stat(p)
	return p, err == nil
}

// claudeLogin: an API key or token in the environment, or a login under
// CLAUDE_CONFIG_DIR (default ~/.claude), where Claude Code keeps
// .credentials.json after /login.
func claudeLogin(o Options, c *Check) {
	if n := envSet(o, "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"); n != "" {
		c.Login, c.LoginOK = n+" set", true
		return
	}
	dir, _ := o.Getenv("CLAUDE_CONFIG_DIR")
	if dir == "" && home(o) != "" {
		dir = filepath.Join(home(o), ".claude")
	}
	if p, ok := fileIn(dir, ".credentials.json"); ok {
		c.Login, c.LoginOK = "login in "+p, true
		return
	}
	c.Login = "not set"
	c.Problems = append(c.Problems, "no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or login")
	c.Fixes = append(c.Fixes, "log in with: claude, then /login (or set ANTHROPIC_API_KEY)")
}

// codexLogin: OPENAI_API_KEY, or the login Codex writes to
// $CODEX_HOME/auth.json (default ~/.codex).
func codexLogin(o Options, c *Check) {
	if n := envSet(o, "OPENAI_API_KEY"); n != "" {
		c.Login, c.LoginOK = n+" set", true
		return
	}
	dir, _ := o.Getenv("CODEX_HOME")
	if dir == "" && home(o) != "" {
		dir = filepath.Join(home(o), ".codex")
	}
	if p, ok := fileIn(dir, "auth.json"); ok {
		c.Login, c.LoginOK = "login in "+p, true
		return
	}
	c.Login = "not set"
	c.Problems = append(c.Problems, "no OPENAI_API_KEY or codex login")
	c.Fixes = append(c.Fixes, "log in with: codex login (or set OPENAI_API_KEY)")
}

// opencodeLogin: a provider key in the environment, or the logins
// OpenCode keeps in $XDG_DATA_HOME/opencode/auth.json (default
// ~/.local/share/opencode).
func opencodeLogin(o Options, c *Check) {
	if n := envSet(o, "ANTHROPIC_API_KEY", "OPENAI_API_KEY"); n != "" {
		c.Login, c.LoginOK = n+" set", true
		return
	}
	dir, _ := o.Getenv("XDG_DATA_HOME")
	if dir == "" && home(o) != "" {
		dir = filepath.Join(home(o), ".local", "share")
	}
	if dir != "" {
		if p, ok := fileIn(filepath.Join(dir, "opencode"), "auth.json"); ok {
			c.Login, c.LoginOK = "login in "+p, true
			return
		}
	}
	c.Login = "not set"
	c.Problems = append(c.Problems, "no provider key or opencode login")
	c.Fixes = append(c.Fixes, "log in with: opencode auth login (or set a provider key such as ANTHROPIC_API_KEY)")
}

// ErrNotReady is returned by Strict when an engine is not ready.
var ErrNotReady = errors.New("not every engine is ready")

// Strict returns an error naming the engines that are not OK, or nil.
func Strict(cs []Check) error {
	var bad []string
	for _, c := range cs {
		if !c.OK {
			bad = append(bad, c.Engine)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w: run the fixes troupe doctor prints", strings.Join(bad, ", "), ErrNotReady)
}

// SandboxInfo is what the CLI knows of the agents' sandbox on this
// machine (internal/sandbox's Detect), for Sandbox's report.
type SandboxInfo struct {
	Mechanism string // "bubblewrap", "landlock" or "none"
	Covers    string // what it contains, and what not
	Why       string // why bubblewrap is not used, and the fix
	// Unsandboxed are the agents of the folder's team that run without
	// it (sandbox = false, or an engine not sandboxed by default).
	Unsandboxed []string
	// Caps says which of the sandboxed agents' memory and process caps
	// this machine enforces (internal/cgroup's Probe, in a sentence);
	// CapsOff lists those not in force, CapsWhy says why and the fix.
	Caps    string
	CapsOff []string
	CapsWhy string
}

// Sandbox is the report's line on the agents' sandbox: the mechanism in
// force and what it covers; not ready when there is none (sandboxed
// agents then do not start); the agents that run unsandboxed, and the
// resources troupe does not cap.
func Sandbox(s SandboxInfo) Check {
	c := Check{Engine: "sandbox", CLI: "bwrap", OK: s.Mechanism != "none" && s.Mechanism != ""}
	c.Login = s.Mechanism + ": " + s.Covers
	if s.Mechanism == "bubblewrap" {
		c.Path, _ = lookPath("bwrap", os.Getenv("PATH"))
	}
	if !c.OK {
		c.Login = "none: sandboxed agents do not start"
	}
	if s.Why != "" {
		c.Problems = append(c.Problems, s.Why)
		c.Fixes = append(c.Fixes, "install bubblewrap (apt-get install bubblewrap) and allow user namespaces; or set sandbox = false for the agents in .troupe/team.toml")
	}
	if len(s.Unsandboxed) > 0 {
		c.Problems = append(c.Problems, "unsandboxed agents: "+strings.Join(s.Unsandboxed, ", "))
		c.Login += "; UNSANDBOXED: " + strings.Join(s.Unsandboxed, ", ")
	}
	// Resources: the caps in force; those that are not are no error
	// (agents run without them), but said with the fix.
	if len(s.CapsOff) == 0 {
		c.Login += "; " + s.Caps
		return c
	}
	c.Login += "; caps not in force: " + strings.Join(s.CapsOff, ", ")
	c.Problems = append(c.Problems, "not in force: "+strings.Join(s.CapsOff, " and ")+" caps per agent: "+s.CapsWhy)
	c.Fixes = append(c.Fixes, "for the "+strings.Join(s.CapsOff, " and ")+" caps per agent: "+s.CapsWhy)
	return c
}
