package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/remote"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// runners is the daemon's link to its runners: the embedded NATS server
// (started only with --runners) and the protocol's daemon side.
type runners struct {
	srv *bus.Server
	rd  *remote.Daemon
}

// startRunners starts the bus on addr (its store under the state dir)
// and the daemon's side of the protocol; nil when addr is empty.
func startRunners(cfg Config, engines map[troupe.Engine]engine.Engine, log *slog.Logger) (*runners, error) {
	if cfg.Runners == "" {
		return nil, nil
	}
	srv, err := bus.Start(bus.ServerOptions{Dir: filepath.Join(cfg.StateDir, "nats"), Addr: cfg.Runners, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("start the runners' bus on %s: %w", cfg.Runners, err)
	}
	rd := remote.NewDaemon(remote.DaemonOptions{Conn: srv.Conn(), Engines: engines,
		Dir: filepath.Join(cfg.StateDir, "runners"), Beat: cfg.RunnerBeat, Logger: log})
	log.Info("runners' bus ready", "url", srv.URL())
	return &runners{srv: srv, rd: rd}, nil
}

// RunnerConfig configures `troupe runner`.
type RunnerConfig struct {
	Creds bus.Creds
	// CredsFile is where Creds were read: hidden from the agents (one
	// that read it could speak for the runner, and so for every agent on
	// it).
	CredsFile string
	Labels    []string
	Root      string // clones, worktrees and the agents' private folders
	MaxAgents int
	// FakeAgent is the fake engine's child command (tests); default this
	// executable's fake-agent.
	FakeAgent []string
	Logger    *slog.Logger
}

// RunRunner runs a runner until ctx ends: it dials the daemon's bus with
// its credentials and runs the agents the daemon assigns to it, on this
// machine's engines, under this machine's sandbox.
func RunRunner(ctx context.Context, cfg RunnerConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := bus.CheckName(cfg.Creds.Name); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return fmt.Errorf("make runner root: %w", err)
	}
	engines, err := newEngines(Config{FakeAgent: cfg.FakeAgent}, nil, log)
	if err != nil {
		return err
	}
	cgroups := cgroup.Open(cgroup.Options{StateDir: cfg.Root, Logger: log})
	defer cgroups.Close()
	var r *remote.Runner
	nc, err := bus.Dial(ctx, cfg.Creds, log, func() {
		if r != nil {
			r.Reconnected()
		}
	})
	if err != nil {
		return err
	}
	defer nc.Close()
	r = remote.NewRunner(remote.RunnerOptions{Conn: nc, Name: cfg.Creds.Name, Labels: cfg.Labels, Root: cfg.Root,
		MaxAgents: cfg.MaxAgents, Engines: engines, Logger: log,
		Sandbox: hideCreds(policies(cfg.Root, func(string) []string { return nil }, cgroups, log), cfg.CredsFile)})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- cgroups.Run(runCtx) }()
	err = r.Run(ctx)
	cancel()
	if cerr := <-errc; cerr != nil && !errors.Is(cerr, context.Canceled) {
		log.Warn("cgroups' owner stopped", "err", cerr)
	}
	return err
}

// hideCreds adds the runner's credentials file to every agent's hidden
// paths.
func hideCreds(pol func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error), file string) func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
	return func(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (sandbox.Policy, error) {
		p, err := pol(ctx, k, spec, dir, work)
		if err == nil && p.On && file != "" {
			p.Hidden = append(p.Hidden, file)
		}
		return p, err
	}
}

// ParseLabels splits --labels: names like a runner's, comma separated.
func ParseLabels(s string) ([]string, error) {
	var out []string
	for l := range strings.SplitSeq(s, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if err := bus.CheckName(l); err != nil {
			return nil, fmt.Errorf("--labels: %q: %w", l, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// runnersFor is the API's view of the runners; nil without --runners.
func runnersFor(links *runners, rt *runtime.Runtime) api.Runners {
	if links == nil {
		return nil
	}
	return &runnersAPI{links: links, rt: rt}
}

// The runners as the API shows them and the person adds and revokes them.
var _ api.Runners = (*runnersAPI)(nil)

type runnersAPI struct {
	links *runners
	rt    *runtime.Runtime
}

// List is every runner with credentials, and where the daemon's sessions
// run.
func (a *runnersAPI) List() []api.RunnerInfo {
	seen := map[string]remote.RunnerInfo{}
	for _, r := range a.links.rd.Runners() {
		seen[r.Name] = r
	}
	var out []api.RunnerInfo
	for _, name := range a.links.srv.Runners() {
		r := seen[name]
		i := api.RunnerInfo{Name: name, Labels: r.Labels, Connected: r.Connected, ConnectedSince: r.ConnectedSince,
			LastSeen: r.LastSeen, Load: api.RunnerLoad{Agents: len(r.Agents), MaxAgents: r.MaxAgents}}
		for _, k := range r.Agents {
			st, _ := a.rt.AgentState(k)
			i.Agents = append(i.Agents, api.RunnerAgent{Project: k.Project, Agent: k.Agent, State: st})
		}
		out = append(out, i)
	}
	return out
}

// Add mints runner name's credentials: the creds file's text.
func (a *runnersAPI) Add(name string) ([]byte, error) {
	c, err := a.links.srv.AddRunner(name)
	if err != nil {
		return nil, err
	}
	return c.Encode()
}

// Revoke ends runner name's credentials; its connection is cut.
func (a *runnersAPI) Revoke(name string) error { return a.links.srv.RevokeRunner(name) }
