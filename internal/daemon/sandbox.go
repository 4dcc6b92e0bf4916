package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// SandboxedByDefault are the engines whose agents are sandboxed unless
// their team says sandbox = false: those whose tests pass in the sandbox
// (the escape suite, cmd/troupe/attack_sandbox_test.go, and their engine
// tests). The others run unsandboxed unless their team says sandbox = true.
var SandboxedByDefault = map[troupe.Engine]bool{
	troupe.EngineFake:   true,
	troupe.EngineOpenAI: true,
}

// sandboxes returns the runtime's Options.Sandbox: the policy of agent k
// of the project in dir, working in work, built from this machine (HOME,
// the state dir, every other registered project, the caches its
// environment names) and the agent's team settings. It makes the agent's
// private temporary folder (<state>/sandbox/<project>/<agent>/tmp) and
// its project's folder of oversize messages.
func sandboxes(stateDir string, reg *project.Registry) func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
	return func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
		in := sandbox.Inputs{Workspace: work, Project: dir, StateDir: stateDir, Team: spec.Sandbox,
			Default: SandboxedByDefault[spec.Engine]}
		if in.Team.Enabled != nil && !*in.Team.Enabled || in.Team.Enabled == nil && !in.Default {
			return sandbox.Policy{}, nil
		}
		in.Home, _ = os.UserHomeDir()
		for _, p := range reg.List() {
			if p.Path != dir {
				in.Others = append(in.Others, p.Path)
			}
		}
		for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
			if x := os.Getenv(v); filepath.IsAbs(x) {
				in.Caches = append(in.Caches, x)
			}
		}
		in.Temp = filepath.Join(stateDir, "sandbox", string(k.Project), string(k.Agent), "tmp")
		in.Messages = filepath.Join(stateDir, "messages", string(k.Project))
		for _, d := range []string{in.Temp, in.Messages} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return sandbox.Policy{}, fmt.Errorf("make sandbox folder: %w", err)
			}
		}
		return sandbox.Build(in), nil
	}
}
