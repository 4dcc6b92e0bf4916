package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// sandboxes returns the runtime's Options.Sandbox: the policy of agent k
// of the project in dir, working in work, built from this machine (HOME,
// the state dir, every other registered project, the caches its
// environment names) and the agent's team settings. It makes the agent's
// private temporary folder (<state>/sandbox/<project>/<agent>/tmp, in
// the agent's own folder of troupe's, Policy.Private) and
// its project's folder of oversize messages.
//
// The agent's caps (memory, processes) get their cgroup from cgroups: one
// that cannot be set is logged and the agent runs without it (caps hold
// where the machine allows).
func sandboxes(stateDir string, reg *project.Registry, cgroups *cgroup.Manager, log *slog.Logger) func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
	return policies(stateDir, func(dir string) []string {
		var others []string
		for _, p := range reg.List() {
			if p.Path != dir {
				others = append(others, p.Path)
			}
		}
		return others
	}, cgroups, log)
}

// policies is sandboxes for any machine: others lists the folders of the
// projects besides dir (a runner keeps its clones in its state dir, hidden
// as a whole).
func policies(stateDir string, others func(dir string) []string, cgroups *cgroup.Manager, log *slog.Logger) func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
	return func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
		in := sandbox.Inputs{Workspace: work, Project: dir, StateDir: stateDir, Team: spec.Sandbox,
			Default: sandbox.ByDefault[spec.Engine]}
		if !sandbox.Enabled(spec) {
			return sandbox.Policy{}, nil
		}
		if work != dir {
			git, err := worktree.GitWritable(ctx, dir, work)
			if err != nil {
				return sandbox.Policy{}, err
			}
			in.GitWritable = git
		}
		in.Home, _ = os.UserHomeDir()
		in.Others = others(dir)
		// The person's agent profiles: read-only to every agent. Made if
		// missing: a sandbox leaves a missing path as its parent says,
		// writable in a workspace that holds it (a project at HOME).
		if d, err := project.ProfileDir(os.Getenv); err == nil {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return sandbox.Policy{}, fmt.Errorf("make the profiles folder: %w", err)
			}
			in.PersonConfig = []string{filepath.Dir(d)}
		}
		env := func(v string) string {
			if x, ok := spec.Env[v]; ok {
				return x
			}
			return os.Getenv(v)
		}
		for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
			if x := env(v); filepath.IsAbs(x) {
				in.Caches = append(in.Caches, x)
			}
		}
		// The engine's own state, where its environment puts it, made if
		// missing: the CLI cannot make it in a read-only HOME. Its
		// configuration stays read-only.
		dirs, config := engineState(spec.Engine, in.Home, env)
		for _, d := range dirs {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return sandbox.Policy{}, fmt.Errorf("make %s's state folder: %w", spec.Engine, err)
			}
		}
		in.EngineDirs, in.EngineConfig = dirs, config
		in.Private = filepath.Join(stateDir, "sandbox", string(k.Project), string(k.Agent))
		in.Temp = filepath.Join(in.Private, "tmp")
		in.Messages = filepath.Join(stateDir, "messages", string(k.Project))
		for _, d := range []string{in.Temp, in.Messages} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return sandbox.Policy{}, fmt.Errorf("make sandbox folder: %w", err)
			}
		}
		p := sandbox.Build(in)
		g, err := cgroups.Group(k, p.Caps)
		if err != nil {
			log.Warn("agent's caps not all set", "project", k.Project, "agent", k.Agent, "err", err)
		}
		p.Cgroup = g
		return p, nil
	}
}

// engineState are the folders an engine's CLI keeps its state in, and
// the configuration files in them it runs commands from (sandbox.
// EngineConfig), as its environment (env: the agent's env table, then the
// daemon's) names them.
func engineState(e troupe.Engine, home string, env func(string) string) (dirs, config []string) {
	or := func(v, def string) string {
		if x := env(v); filepath.IsAbs(x) {
			return x
		}
		if home == "" {
			return ""
		}
		return filepath.Join(home, def)
	}
	switch e {
	case troupe.EngineClaude:
		if d := or("CLAUDE_CONFIG_DIR", ".claude"); d != "" {
			dirs = []string{d}
			config = []string{filepath.Join(d, "settings.json"), filepath.Join(d, "settings.local.json")}
			if env("CLAUDE_CONFIG_DIR") != "" {
				config = append(config, filepath.Join(d, ".claude.json"))
			}
		}
	case troupe.EngineCodex:
		if d := or("CODEX_HOME", ".codex"); d != "" {
			dirs, config = []string{d}, []string{filepath.Join(d, "config.toml")}
		}
	case troupe.EngineOpenCode:
		for _, x := range [][2]string{{"XDG_DATA_HOME", ".local/share"}, {"XDG_CONFIG_HOME", ".config"},
			{"XDG_STATE_HOME", ".local/state"}, {"XDG_CACHE_HOME", ".cache"}} {
			if d := or(x[0], x[1]); d != "" {
				dirs = append(dirs, filepath.Join(d, "opencode"))
				if x[0] == "XDG_CONFIG_HOME" {
					for _, c := range sandbox.OpenCodeConfig {
						config = append(config, filepath.Join(d, "opencode", c))
					}
				}
			}
		}
	}
	return dirs, config
}

// capsOf are agent spec's caps: none when it is unsandboxed.
func capsOf(spec troupe.AgentSpec) cgroup.Limits {
	if !sandbox.Enabled(spec) {
		return cgroup.Limits{}
	}
	var l cgroup.Limits
	l.Memory, l.Processes = spec.Sandbox.Caps()
	return l
}
