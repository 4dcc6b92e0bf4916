package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Policy is what one agent's processes may reach. Paths are absolute and
// cleaned; everything not named is readable and not writable. Where paths
// nest, the deepest one decides (a worktree inside the hidden state dir is
// writable; .troupe/ inside the writable workspace is read-only).
type Policy struct {
	// On says whether the agent is sandboxed at all; off, Wrap returns the
	// argv unchanged.
	On bool `json:"on"`
	// Writable paths are readable and writable.
	Writable []string `json:"writable,omitempty"`
	// ReadOnly paths are readable, not writable (inside writable or hidden
	// ones).
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden paths are neither readable nor writable.
	Hidden []string `json:"hidden,omitempty"`
	// Network off cuts the process from every network but its own
	// loopback (bubblewrap) or from TCP (Landlock). Applies to commands
	// (tasks, run_command); an engine's own CLI keeps the network it needs
	// to reach its model and troupe (ForEngine).
	Network bool `json:"network"`
	// Temp is the agent's private temporary folder: writable, and TMPDIR
	// in the sandbox (/tmp itself is read-only there).
	Temp string `json:"temp,omitempty"`
	// Mechanism forces a mechanism; empty: Detect's.
	Mechanism Mechanism `json:"mechanism,omitempty"`
	// Binds show a folder of the agent's own (Source) at Target, writable,
	// under bubblewrap only: Landlock makes no mounts, and there Target
	// stays what the rest of the policy says. An engine gives its CLI so a
	// private folder where the CLI names files by its pid (Claude Code's
	// session registry, ~/.claude/sessions/<pid>.json): in the pid
	// namespace of each bubblewrap sandbox the CLI is pid 1, and agents
	// sharing the person's folder would overwrite each other's files.
	Binds []Bind `json:"binds,omitempty"`
	// Private is a folder of troupe's for this agent, out of the
	// sandbox's reach (under the hidden state dir) and for it alone,
	// where an engine keeps the sources of its Binds. "": none (no Binds).
	Private string `json:"-"`
	// AsInit makes the program pid 1 of its pid namespace under
	// bubblewrap (--as-pid-1) instead of a child of bubblewrap's own
	// reaper. That reaper outlives bubblewrap by a moment and is then a
	// zombie left to the machine's init (or the nearest subreaper): for a
	// parent that is no subreaper (the daemon), AsInit leaves nothing
	// behind. As pid 1 the program gets only the signals it handles
	// (SIGKILL aside). Task supervisors, subreapers, do without it.
	AsInit bool `json:"-"`
	// Caps are the agent's memory and process caps (the team's, or the
	// defaults); Cgroup is the cgroup that enforces them, made by the
	// daemon (internal/cgroup): every process of the sandbox is born in
	// it (v2) or joins it first thing (v1, through the helper). The zero
	// Cgroup: no caps on this machine.
	Caps   cgroup.Limits `json:"-"`
	Cgroup cgroup.Group  `json:"cgroup,omitzero"`
	// Whole are writable folders that the Landlock mechanism grants whole,
	// read-only paths inside them included: the engines' state folders,
	// where their CLIs make new entries at the top (Claude Code's
	// credentials, Codex's SQLite journals), which a folder split around
	// a read-only file refuses (LandlockRules). Bubblewrap mounts the
	// read-only paths inside them over.
	Whole []string `json:"whole,omitempty"`
	// Seeds are read-only files made before a bubblewrap sandbox starts
	// when they are missing, with this content, so that they can be
	// mounted read-only: an agent cannot then create one the person's own
	// CLI would trust (~/.claude/settings.json, ~/.codex/config.toml).
	// Made only in a folder that exists.
	Seeds map[string]string `json:"-"`
	// Helper is the argv that runs HelperMain (the Landlock mechanism):
	// troupe's binary, or a test binary whose TestMain calls MaybeRunHelper.
	// Empty: this executable.
	Helper []string `json:"-"`
}

// Bind is a folder shown at another path in the sandbox (Policy.Binds).
type Bind struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Enforcer is the mechanism that enforces p on this machine: p.Mechanism,
// else Detect's; "" when p is off.
func (p Policy) Enforcer() Mechanism {
	switch {
	case !p.On:
		return ""
	case p.Mechanism != "":
		return p.Mechanism
	}
	return Detect().Mechanism
}

// ForEngine is the policy of an engine's own process: p with the network
// on, since the engine reaches its model and troupe's MCP endpoint.
func (p Policy) ForEngine() Policy {
	p.Network = true
	return p
}

// Inputs are what Build needs of the machine and the agent.
type Inputs struct {
	// Workspace is the agent's folder: its project's folder or its worktree.
	Workspace string
	// Project is its project's folder; when it differs from Workspace (a
	// worktree agent), the project's folder is read-only but for
	// GitWritable.
	Project string
	// GitWritable are the paths of the project's repository that a
	// worktree agent's git writes to commit on its branch (worktree.
	// GitWritable): its objects, its worktree's own folder, the folders of
	// troupe's branches. The rest of .git (the person's HEAD, index and
	// branches, config, hooks) stays read-only.
	GitWritable []string
	// StateDir is troupe's state dir: hidden.
	StateDir string
	// Messages is the folder of the agent's project's oversize messages
	// (<state>/messages/<project>): readable, so the agent can read them.
	Messages string
	// Others are the folders of every other registered project and every
	// worktree but the agent's own: hidden.
	Others []string
	// Home is the person's home folder ("": none of its paths).
	Home string
	// Caches are other folders to keep writable: build caches the
	// environment names (GOCACHE, GOMODCACHE).
	Caches []string
	// EngineDirs are the engine's state folders where its environment
	// puts them (CODEX_HOME, XDG_DATA_HOME/opencode ...): writable, and
	// granted whole under Landlock (Policy.Whole).
	EngineDirs []string
	// EngineConfig are the engine's configuration files where its
	// environment puts them (CLAUDE_CONFIG_DIR/settings.json,
	// CODEX_HOME/config.toml, XDG_CONFIG_HOME/opencode): read-only, as
	// the defaults under HOME (EngineConfig).
	EngineConfig []string
	// PersonConfig are the person's own troupe configuration folders
	// (the agent profiles' folder's parent, $XDG_CONFIG_HOME/troupe):
	// read-only, even inside a writable workspace (a project at HOME), so
	// that an agent cannot rewrite a profile its team uses.
	PersonConfig []string
	// Temp is the agent's private temporary folder (made by the caller).
	Temp string
	// Private is troupe's folder for the agent, out of its reach
	// (Policy.Private; made by the caller).
	Private string
	// Team is the team file's [agent.sandbox].
	Team troupe.AgentSandbox
	// Default says whether the sandbox is on when the team does not say
	// (sandbox = true/false).
	Default bool
}

// ByDefault are the engines whose agents are sandboxed unless their team
// says sandbox = false: those whose tests pass in the sandbox (the escape
// suite, cmd/troupe/attack_sandbox_test.go, and their real-CLI tests).
// The others run unsandboxed unless their team says sandbox = true.
var ByDefault = map[troupe.Engine]bool{
	troupe.EngineFake:     true,
	troupe.EngineOpenAI:   true,
	troupe.EngineClaude:   true,
	troupe.EngineCodex:    true,
	troupe.EngineOpenCode: true,
	troupe.EngineTerminal: true,
	troupe.EngineACP:      true,
}

// Enabled says whether agent spec is sandboxed: its team's sandbox =
// true/false, else its engine's default (ByDefault). Every engine and
// mode is sandboxed by default: terminal-mode programs too (Claude Code's
// TUI, the generic terminal engine), whose terminal stays their
// controlling one inside the sandbox (BwrapArgv starts no new session;
// proc.Spec.TTY gives the sandbox a session of its own on troupe's
// terminal).
func Enabled(spec troupe.AgentSpec) bool {
	if spec.Sandbox.Enabled != nil {
		return *spec.Sandbox.Enabled
	}
	return ByDefault[spec.Engine]
}

// Credentials are the usual credential stores under HOME: hidden.
var Credentials = []string{
	".ssh", ".gnupg", ".aws", ".kube", ".docker/config.json", ".netrc",
	".config/gcloud", ".azure", ".config/gh", ".git-credentials",
	".pgpass", ".npmrc", ".pypirc", ".config/hub", ".password-store",
	".local/share/keyrings", ".terraform.d/credentials.tfrc.json",
}

// EngineState are the engines' own state under HOME: writable (Claude
// Code, Codex, OpenCode keep their sessions and logs there), but for
// EngineConfig inside them.
var EngineState = []string{
	".claude", ".codex", ".config/opencode", ".local/share/opencode", ".cache/opencode", ".local/state/opencode",
}

// EngineConfig are the files under HOME that the person's own engine
// CLIs run commands from: Claude Code's MCP servers (~/.claude.json) and
// hooks, status line and key helper (settings.json), Codex's MCP servers
// and notify command (config.toml), OpenCode's config, plugins and tools
// (OpenConfig). They are read-only, so that an agent cannot plant a
// command that the person's unsandboxed CLI runs later. ~/.claude.json is
// outside any writable folder, so both mechanisms hold it; the others,
// inside the engines' writable state folders, only bubblewrap holds
// (those folders are granted whole under Landlock: Policy.Whole). Claude Code
// cannot save ~/.claude.json from a sandbox anyway (it writes the file
// through a temporary one beside it, in the read-only HOME): troupe saves
// the approvals it needs (internal/engine/claude).
var EngineConfig = []string{
	".claude.json", ".claude/settings.json", ".claude/settings.local.json", ".codex/config.toml",
}

// OpenCodeConfig are the entries of OpenCode's configuration folder
// (~/.config/opencode) that are read-only in EngineConfig: its config
// files and the folders of the code it loads. The folder itself stays
// writable: OpenCode writes its .gitignore, package.json and
// node_modules there at start.
var OpenCodeConfig = []string{"opencode.json", "opencode.jsonc", "config.json", "plugin", "plugins", "tool", "tools"}

// seedBodies are the contents of a missing configuration entry made so
// that it can be mounted read-only (Policy.Seeds), by the entry's name:
// what the CLI reads as "nothing set" ("/": an empty folder).
var seedBodies = map[string]string{
	"settings.json": "{}\n", "config.toml": "",
	"plugin": "/", "plugins": "/", "tool": "/", "tools": "/",
}

// HomeCaches are build caches under HOME: writable.
var HomeCaches = []string{".cache", ".npm", "go/pkg/mod", ".cargo/registry"}

// ToolConfig are the paths inside a workspace that stay read-only: the
// team, git's configuration and hooks, the engines' project settings.
var ToolConfig = []string{".troupe", ".git/config", ".git/hooks", ".claude", ".codex", ".mcp.json"}

// Build makes an agent's policy. Paths are cleaned and their symbolic
// links resolved (a mount or a Landlock rule applies to what a link
// names); a path named twice keeps the stronger kind (hidden over
// read-only over writable), except the team's own lists, which override
// the defaults for the paths they name.
func Build(in Inputs) Policy {
	on := in.Default
	if in.Team.Enabled != nil {
		on = *in.Team.Enabled
	}
	p := Policy{On: on, Network: in.Team.Network == nil || *in.Team.Network, Temp: clean(in.Temp), Private: clean(in.Private)}
	p.Caps.Memory, p.Caps.Processes = in.Team.Caps()
	home := func(rel ...string) []string {
		if in.Home == "" {
			return nil
		}
		out := make([]string, 0, len(rel))
		for _, r := range rel {
			out = append(out, filepath.Join(in.Home, r))
		}
		return out
	}
	ws := clean(in.Workspace)
	inWS := func(rel ...string) []string {
		out := make([]string, 0, len(rel))
		for _, r := range rel {
			out = append(out, filepath.Join(ws, r))
		}
		return out
	}
	writable := []string{ws}
	engineDirs := append(home(EngineState...), in.EngineDirs...)
	writable = append(writable, engineDirs...)
	writable = append(writable, home(HomeCaches...)...)
	writable = append(writable, in.Caches...)
	if in.Temp != "" {
		writable = append(writable, in.Temp)
	}
	config := append(home(EngineConfig...), in.EngineConfig...)
	for _, c := range OpenCodeConfig {
		config = append(config, home(filepath.Join(".config/opencode", c))...)
	}
	readOnly := append(inWS(ToolConfig...), config...)
	readOnly = append(readOnly, in.PersonConfig...)
	if in.Messages != "" {
		readOnly = append(readOnly, in.Messages)
	}
	hidden := append([]string{in.StateDir}, in.Others...)
	hidden = append(hidden, home(Credentials...)...)
	if proj := clean(in.Project); proj != "" && proj != ws {
		// A worktree agent: the project's folder read-only but for what
		// its git needs to commit on its branch.
		readOnly = append(readOnly, proj)
		writable = append(writable, in.GitWritable...)
	}
	team := func(paths []string) []string {
		out := make([]string, 0, len(paths))
		for _, t := range paths {
			switch {
			case t == "~":
				t = in.Home
			case strings.HasPrefix(t, "~/"):
				t = filepath.Join(in.Home, t[2:])
			case !filepath.IsAbs(t):
				t = filepath.Join(ws, t)
			}
			out = append(out, t)
		}
		return out
	}
	tr, tw, th := team(in.Team.Readable), team(in.Team.Writable), team(in.Team.Hidden)
	// The team's lists override the defaults for the paths they name.
	drop := func(list []string, named ...[]string) []string {
		return slices.DeleteFunc(list, func(x string) bool {
			for _, n := range named {
				if slices.Contains(n, x) {
					return true
				}
			}
			return false
		})
	}
	writable = append(drop(writable, tr, th), tw...)
	readOnly = append(drop(readOnly, tw, th), tr...)
	hidden = append(drop(hidden, tr, tw), th...)

	p.Hidden = resolveAll(hidden)
	p.ReadOnly = drop(resolveAll(readOnly), p.Hidden)
	p.Writable = drop(resolveAll(writable), p.Hidden, p.ReadOnly)
	p.Whole = resolveAll(engineDirs)
	for _, c := range resolveAll(config) {
		body, ok := seedBodies[filepath.Base(c)]
		if ok && slices.Contains(p.ReadOnly, c) {
			if p.Seeds == nil {
				p.Seeds = map[string]string{}
			}
			p.Seeds[c] = body
		}
	}
	return p
}

// seed makes p's missing Seeds whose folder exists (O_EXCL: a file made
// meanwhile is kept as it is).
func (p Policy) seed() error {
	for path, body := range p.Seeds {
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if isDir, ok := exists(filepath.Dir(path)); !ok || !isDir {
			continue
		}
		if body == "/" {
			if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("make %s to protect it: %w", path, err)
			}
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("make %s to protect it: %w", path, err)
		}
		_, err = f.WriteString(body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("make %s to protect it: %w", path, err)
		}
	}
	return nil
}

// clean is filepath.Clean of an absolute path, "" otherwise.
func clean(p string) string {
	if p == "" || !filepath.IsAbs(p) {
		return ""
	}
	return filepath.Clean(p)
}

// resolveAll cleans, resolves and deduplicates paths, sorted. A path that
// does not exist is kept as written (its parent resolved): a Wrap skips
// it, or mounts a placeholder where one is needed.
func resolveAll(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p = clean(p); p == "" || p == "/" {
			continue
		}
		out = append(out, resolve(p))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolve is filepath.EvalSymlinks of p, or of its nearest existing
// parent with the rest joined back when p does not exist.
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(p)
	dir = filepath.Clean(dir)
	if dir == p || dir == "/" {
		return p
	}
	return filepath.Join(resolve(dir), base)
}

// within reports whether p is root or inside it.
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// depth is the number of components of a clean absolute path.
func depth(p string) int { return strings.Count(p, "/") }

// kind of a mount, in the order they apply at equal depth.
type kind int

const (
	kindHidden kind = iota
	kindWritable
	kindReadOnly
)

type mount struct {
	path string
	kind kind
}

// mounts lists the policy's paths shallowest first: a deeper path is
// mounted after, so over, the folder that holds it.
func (p Policy) mounts() []mount {
	var ms []mount
	for _, h := range p.Hidden {
		ms = append(ms, mount{h, kindHidden})
	}
	for _, w := range p.Writable {
		ms = append(ms, mount{w, kindWritable})
	}
	for _, r := range p.ReadOnly {
		ms = append(ms, mount{r, kindReadOnly})
	}
	slices.SortStableFunc(ms, func(a, b mount) int {
		return cmp.Or(cmp.Compare(depth(a.path), depth(b.path)), cmp.Compare(a.kind, b.kind), strings.Compare(a.path, b.path))
	})
	return ms
}

// exists reports what is at p (following links): a folder, a file, or
// nothing.
func exists(p string) (isDir, ok bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, false
	}
	return fi.IsDir(), true
}

// Access is what p lets a process do with path (absolute, its links
// resolved): the kind of the deepest path of p that holds it; a path no
// entry holds is readable. For the tools troupe runs in its own process on
// an agent's behalf (the openai engine's file tools), which no process
// sandbox wraps.
func (p Policy) Access(path string) (readable, writable bool) {
	if !p.On {
		return true, true
	}
	best, kindOf := -1, kind(-1)
	for _, m := range p.mounts() {
		if within(path, m.path) && depth(m.path) >= best {
			best, kindOf = depth(m.path), m.kind
		}
	}
	switch kindOf {
	case kindHidden:
		return false, false
	case kindWritable:
		return true, true
	default:
		return true, false
	}
}
