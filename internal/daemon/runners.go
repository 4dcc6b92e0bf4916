package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/remote"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// NATSConfig is serve --nats: the runners' bus is an existing NATS
// cluster, not the embedded server.
type NATSConfig struct {
	URLs       string // --nats: the cluster's URLs, comma separated
	Creds      string // --nats-creds: the daemon's user (a standard credentials file)
	SigningKey string // --nats-signing-key: a signing key's seed of its account, to mint runners' users
	CA         string // --nats-ca: the PEM of the CA of the cluster's certificates
}

// runners is the daemon's link to its runners: the bus (the embedded NATS
// server, started only with --runners, or an existing cluster, --nats)
// and the protocol's daemon side.
type runners struct {
	srv busLink
	rd  *remote.Daemon
}

// busLink is what the daemon does with its bus: *bus.Server (embedded)
// or *bus.External (an existing cluster).
type busLink interface {
	Runners() []string
	AddRunner(name string) (bus.Creds, error)
	RevokeRunner(name string) error
	URL() string
	Close() error
}

// startRunners starts the bus (on --runners, its store under the state
// dir; or connected to the cluster of --nats) and the daemon's side of the
// protocol; nil when neither is given.
func startRunners(ctx context.Context, cfg Config, engines map[troupe.Engine]engine.Engine, log *slog.Logger) (*runners, error) {
	n := cfg.NATS
	if cfg.Runners != "" && n.URLs != "" {
		return nil, errors.New("--runners and --nats: give one: --runners embeds a NATS server for the runners, --nats uses an existing cluster")
	}
	if n.URLs == "" && (n.Creds != "" || n.SigningKey != "" || n.CA != "") {
		return nil, errors.New("--nats-creds, --nats-signing-key and --nats-ca go with --nats URL: give the cluster's URLs")
	}
	o := remote.DaemonOptions{Engines: engines, Dir: filepath.Join(cfg.StateDir, "runners"), Beat: cfg.RunnerBeat, Logger: log}
	var link busLink
	switch {
	case cfg.Runners != "":
		srv, err := bus.Start(bus.ServerOptions{Dir: filepath.Join(cfg.StateDir, "nats"), Addr: cfg.Runners, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("start the runners' bus on %s: %w", cfg.Runners, err)
		}
		link, o.Conn = srv, srv.Conn()
	case n.URLs != "":
		ext, err := bus.DialExternal(ctx, bus.ExternalOptions{URLs: n.URLs, CredsFile: n.Creds, SigningKeyFile: n.SigningKey,
			CAFile: n.CA, Dir: filepath.Join(cfg.StateDir, "nats"), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("connect the runners' bus: %w", err)
		}
		link, o.Conn, o.Replicas, o.Allowed = ext, ext.Conn(), ext.Replicas, ext.Allowed
	default:
		return nil, nil
	}
	log.Info("runners' bus ready", "url", link.URL())
	return &runners{srv: link, rd: remote.NewDaemon(o)}, nil
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

// Revoke ends runner name's credentials (on the embedded server its
// connection is cut; on a cluster the daemon ignores it from then on),
// and the daemon drops it: its stream deleted, its sessions ended as
// unreachable.
func (a *runnersAPI) Revoke(name string) error {
	if err := a.links.srv.RevokeRunner(name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.links.rd.Drop(ctx, name)
}
