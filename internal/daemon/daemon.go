// Package daemon wires troupe together: it takes the state directory's lock,
// opens the store, loads the project registry, and serves the API and web UI
// until its context ends, then stops everything it started, in order.
//
// Run is the single owner of every goroutine the daemon starts; it returns
// only when all of them have stopped. Only cmd/troupe (through internal/cli)
// imports daemon.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/atomicfile"
	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/claudefmt"
	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/openai"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/mcp"
	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/statedir"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/web"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// The SQLite store keeps the agents' conversation ids (it cannot import
// the runtime to say so itself).
var _ runtime.Sessions = (*sqlite.SessionStore)(nil)

// It keeps the openai agents' conversations too.
var _ openai.Store = (*sqlite.ChatStore)(nil)

// The Claude sessions of the machine, as the API serves them; the runtime
// hands a session to an agent.
var (
	_ api.ClaudeSessions = (*claudesessions.Machine)(nil)
	_ api.SessionAdopter = (*runtime.Runtime)(nil)
)

// The registry's watcher reports memory-folder events to the notes' store.
var _ project.MemoryWatcher = (*memory.Store)(nil)

// DefaultMaxSessions is how many agent sessions the daemon keeps live at
// once unless told otherwise.
const DefaultMaxSessions = runtime.DefaultMaxSessions

// DefaultCheckpointsKeep and DefaultCheckpointsKeepFor are the checkpoints
// of each agent kept by default: the newest 200, and every one of the
// last 7 days (worktree.DefaultRetention).
var (
	DefaultCheckpointsKeep    = worktree.DefaultRetention.Keep
	DefaultCheckpointsKeepFor = worktree.DefaultRetention.KeepFor
)

// DefaultAddr is where the daemon listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7433"

// Config configures a daemon run.
type Config struct {
	Addr     string // default DefaultAddr
	StateDir string // required
	Version  string
	Logger   *slog.Logger // default: discard
	// Out receives the ready line with the login URL; default os.Stdout.
	Out io.Writer
	// Projects are registered at start when not already registered.
	Projects []string
	// AskCeiling is the absolute limit of an ask; default 4h.
	AskCeiling time.Duration
	// FakeAgent is the command of the fake engine's child; default: this
	// executable with the argument fake-agent.
	FakeAgent []string
	// TaskSupervisor is the command of a task's supervisor; default: this
	// executable with the argument task-supervise.
	TaskSupervisor []string
	// MaxSessions bounds the agent sessions live at once (--max-sessions);
	// default DefaultMaxSessions.
	MaxSessions int
	// CheckpointsKeep and CheckpointsKeepFor say which checkpoints of
	// each agent are kept (--checkpoints-keep, --checkpoints-keep-for:
	// worktree.Retention); zero: DefaultCheckpointsKeep, and
	// DefaultCheckpointsKeepFor when both are zero.
	CheckpointsKeep    int
	CheckpointsKeepFor time.Duration
	// MaxTasksPerProject bounds running background tasks per project;
	// default 8.
	MaxTasksPerProject int
	// TaskMaxOutput is the output a background task keeps unless it is
	// given its own cap; default task.DefaultMaxOutput (64 MB).
	TaskMaxOutput int64
	// SessionIdle is how long a browser login session lasts unused;
	// default api.DefaultSessionIdle (12h).
	SessionIdle time.Duration
	// AllowRemote lets Addr be beyond loopback (--allow-remote); without
	// it such an address is refused at start.
	AllowRemote bool
	// PublicName is the host name browsers on other machines use
	// (--public-name); Host and Origin checks accept it besides the
	// loopback names. Required with AllowRemote on an unspecified address.
	PublicName string
	// ClaudeDir is Claude Code's config folder whose sessions `troupe
	// sessions` lists (--claude-dir); default $CLAUDE_CONFIG_DIR, else
	// ~/.claude.
	ClaudeDir string
	// Runners, if set, is where runners on other machines connect
	// (--runners): the daemon embeds a NATS server there, its JetStream
	// store under the state dir. Empty: no runners, and an agent with a
	// runner cannot start.
	Runners string
	// NATS, if its URLs are set (--nats), is an existing NATS cluster the
	// runners connect to instead (exclusive with Runners).
	NATS NATSConfig
	// RunnerBeat is how often runners say they are alive (tests shorten
	// it); default remote.DefaultBeat.
	RunnerBeat time.Duration
}

// CheckAddr refuses a listening address beyond loopback unless allowRemote
// is set, and then one that browsers could only reach by a name the
// daemon does not know (publicName). A host name counts as loopback when
// every address it resolves to is.
func CheckAddr(ctx context.Context, addr string, allowRemote bool, publicName string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w: give HOST:PORT, like %s", addr, err, DefaultAddr)
	}
	if publicName != "" {
		if !allowRemote {
			return fmt.Errorf("--public-name %s needs --allow-remote: a daemon on loopback is reached by loopback names only", publicName)
		}
		if net.ParseIP(publicName) == nil && strings.ContainsAny(publicName, ":/ ") {
			return fmt.Errorf("--public-name %q: give a bare host name or address, without scheme or port", publicName)
		}
	}
	ip := net.ParseIP(host)
	unspecified := host == "" || (ip != nil && ip.IsUnspecified())
	if !unspecified && loopback(ctx, host) {
		return nil
	}
	where := host
	if host == "" {
		where = "every interface"
	}
	if !allowRemote {
		return fmt.Errorf("listening on %s exposes your agents beyond this machine: pass --allow-remote and --public-name HOST if you mean it", where)
	}
	if unspecified && publicName == "" {
		return fmt.Errorf("listening on %s with --allow-remote needs --public-name HOST: the name browsers use to reach this machine (Host and Origin are checked against it)", where)
	}
	return nil
}

// loopback reports whether host is, or only resolves to, loopback
// addresses.
func loopback(ctx context.Context, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// Run runs the daemon until ctx ends. It returns nil after a clean stop.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	log := cfg.Logger
	if err := CheckAddr(ctx, cfg.Addr, cfg.AllowRemote, cfg.PublicName); err != nil {
		return err
	}
	// The daemon's environment holds the model keys (api_key_env, the
	// engines' variables) and agents run commands as the same user: made
	// not dumpable, its /proc/<pid>/environ, mem and fd/ are closed to
	// them (as ssh-agent does). Debuggers of the same user cannot attach
	// either; its children are dumpable again once they exec.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn("could not hide the daemon's environment from its agents (prctl PR_SET_DUMPABLE)", "err", err)
	}
	dir := statedir.Dir(cfg.StateDir)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	if err := dir.Check(); err != nil {
		return err
	}
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	token, err := dir.EnsureToken()
	if err != nil {
		return err
	}
	// The store tells, once, from the write that found it, that its file
	// was deleted or replaced: the daemon stops rather than go on writing
	// into a file nobody will open again.
	gone := make(chan error, 1)
	db, err := sqlite.Open(ctx, dir.DB(), sqlite.Options{Logger: log, OnGone: func(err error) {
		select {
		case gone <- err:
		default:
		}
	}})
	if err != nil {
		return err
	}
	defer db.Close()

	// Construction order: each component gets only what is already built.
	// The two ways back (the registry and the task manager tell the runtime,
	// whose tools include the task manager's) are closed by reg.Listen and
	// tasks.OnComplete, before anything runs.
	hub := events.New(events.Options{})
	engines, err := newEngines(cfg, db.Chats(), log)
	if err != nil {
		return err
	}
	// The notes' index follows the memory folders through the registry's
	// file watcher (one watcher for the team and memory folders).
	notes := memory.New(memory.Options{Index: db.MemoryIndex(), Logger: log})
	// The person's agent profiles: the registry watches their folder,
	// made here if missing so that the watch holds from the start.
	profiles, err := project.ProfileDir(os.Getenv)
	if err == nil {
		if err := os.MkdirAll(profiles, 0o700); err != nil {
			log.Warn("make the profiles folder: a profile made later is seen at the next restart or team file change", "path", profiles, "err", err)
		}
	} else {
		log.Warn("no profiles folder: agents with profile = \"NAME\" do not load", "err", err)
	}
	reg, err := project.Open(ctx, project.Options{Store: db.Projects(), Logger: log, Check: checkAgent(engines), Memory: notes, Profiles: profiles})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w: pass another --addr", cfg.Addr, err)
	}
	addr := ln.Addr().String()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		if !cfg.AllowRemote { // a name that resolved to loopback, then bound elsewhere
			ln.Close()
			return fmt.Errorf("listening on %s exposes your agents beyond this machine: pass --allow-remote and --public-name HOST if you mean it", addr)
		}
		log.Warn("listening beyond loopback (--allow-remote): anyone who can reach this address and holds the token can drive your agents", "addr", addr, "public_name", cfg.PublicName)
	}
	// Clients on this machine (the CLI, the agents' MCP) dial local: never
	// 0.0.0.0 or [::], which the Host check refuses.
	local := api.LocalAddr(addr)
	tokens := mcp.NewTokens()
	links, err := startRunners(ctx, cfg, engines, log)
	if err != nil {
		return err
	}
	var remoteEngine engine.Engine
	var remoteTasks task.Remote // the tasks of the runners' agents run there
	if links != nil {
		defer links.srv.Close()
		remoteEngine, remoteTasks = links.rd.Engine(), links.rd.Tasks()
	}
	tasks := task.New(task.Options{Store: db.Tasks(), Inbox: db.Inbox(), Dir: filepath.Join(cfg.StateDir, "tasks"), Logger: log,
		Supervisor: cfg.TaskSupervisor, MaxPerProject: cfg.MaxTasksPerProject, MaxOutput: cfg.TaskMaxOutput, Remote: remoteTasks})
	if links != nil {
		links.rd.SetTasks(tasks) // a runner's task's end, recorded and posted here
	}
	trees := worktree.New(filepath.Join(cfg.StateDir, "worktrees"))
	claudeDir := cfg.ClaudeDir
	if claudeDir == "" {
		if claudeDir, err = claudefmt.ConfigDir(os.Getenv); err != nil {
			return err
		}
	}
	claude := claudesessions.NewMachine(claudesessions.MachineOptions{Dir: claudeDir, Store: db.ClaudeSessions(), Agents: db.ClaudeSessions(), Logger: log,
		Projects: func() []claudesessions.ProjectRef {
			var out []claudesessions.ProjectRef
			for _, p := range reg.List() {
				out = append(out, claudesessions.ProjectRef{ID: p.ID, Path: p.Path})
			}
			return out
		}})
	// The agents' memory and process caps (issue 20): one cgroup each.
	cgroups := cgroup.Open(cgroup.Options{StateDir: cfg.StateDir, Logger: log})
	retention := worktree.Retention{Keep: cfg.CheckpointsKeep, KeepFor: cfg.CheckpointsKeepFor}
	if retention.Keep <= 0 {
		if retention.KeepFor == 0 {
			retention.KeepFor = DefaultCheckpointsKeepFor
		}
		retention.Keep = DefaultCheckpointsKeep
	}
	cps := checkpoints{trees: trees, retention: retention}
	// The project's checks, run by troupe in an agent's workspace as tasks
	// of its own (internal/check): the approved team's, in the agent's
	// sandbox, their results kept and on the feed; they verify delegations
	// that name one (verifier).
	checks := check.New(check.Options{Teams: reg, Tasks: tasks, Store: db.Checks(), Workspace: trees.Dir,
		Sandbox: sandboxes(cfg.StateDir, reg, cgroups, log), Journal: db.Journal(), Logger: log,
		Publish: func(r check.Result) {
			hub.Publish(r.Key(), events.CheckEnded{ID: r.ID, Check: r.Check, State: r.State, ExitCode: r.ExitCode, Turn: r.Turn, DurationMS: r.DurationMS})
		}})
	rt := runtime.New(runtime.Options{ClaimSession: claimClaude(claude), Store: db.Inbox(), Sessions: db.Sessions(), Teams: reg, Hub: hub, Logger: log, Ceiling: cfg.AskCeiling, Workspace: trees.Dir,
		Sandbox: sandboxes(cfg.StateDir, reg, cgroups, log),
		Grants:  tokens, MCPURL: "http://" + local + "/mcp", Briefing: notes.Briefing,
		Tools: slices.Concat(task.Tools(tasks), memory.Tools(notes)), Engines: engines, Journal: db.Journal(),
		MessageDir: filepath.Join(cfg.StateDir, "messages"), MaxSessions: cfg.MaxSessions,
		Checkpoints: cps, Remote: remoteEngine, Verifier: verifier{checks}})
	// Best-of-N attempts (internal/attempt): one task delegated to several
	// worktree agents from the project's HEAD, each checked when it ends,
	// ranked; resumed after a restart.
	attempts := attempt.New(attempt.Options{Teams: reg, Worktrees: trees, Requests: rt, Checks: checks,
		Store: db.Attempts(), Journal: db.Journal(), Logger: log,
		Publish: func(a attempt.Attempt) {
			hub.Publish(troupe.RuntimeKey{Project: a.Project}, events.AttemptChanged{ID: int64(a.ID), State: string(a.State), Winner: a.Winner})
		}})
	tasks.OnComplete(rt.Queued) // the runtime wakes a task's owner
	tasks.OnChange(func(t task.Task) { publishTask(hub, t) })
	pruneNow := make(chan struct{}, 1)
	reg.Listen(func(c troupe.TeamChange) {
		hub.Publish(troupe.RuntimeKey{Project: c.Project}, events.TeamChanged{TeamChange: c})
		if len(c.Held)+len(c.HeldChecks) > 0 {
			d := ""
			if p, ok := reg.Pending(c.Project); ok {
				d = p.Digest
			}
			hub.Publish(troupe.RuntimeKey{Project: c.Project}, events.TeamHeld{Digest: d, Agents: c.Held, Checks: c.HeldChecks})
		}
		rt.TeamChanged(c)
		keptWorktrees(c, trees, hub, log)
		for _, a := range c.Removed {
			cgroups.Remove(troupe.RuntimeKey{Project: c.Project, Agent: a})
		}
		// A cap changed applies at once to what the agent runs (its tasks
		// too), not only from its next session.
		for _, a := range c.Changed {
			k := troupe.RuntimeKey{Project: c.Project, Agent: a}
			if spec, _, ok := reg.Agent(k); ok {
				if err := cgroups.Update(k, capsOf(spec)); err != nil {
					log.Warn("agent's caps not all set", "project", k.Project, "agent", k.Agent, "err", err)
				}
			}
		}
	}, nil) // a removal is removal.Remove's to carry out
	mcpHandler := mcp.Handler(mcp.Options{Tokens: tokens, Tools: rt, Version: cfg.Version, Logger: log})
	removed := &removal{ctx: ctx, log: log, reg: reg, hub: hub, rt: rt, notes: notes, tasks: tasks, trees: trees, cgroups: cgroups, cps: cps, pruneNow: pruneNow}

	// troupe stop: the API asks, the loop below stops as on a signal.
	stopAsked := make(chan struct{})
	var stopOnce sync.Once
	srv := api.New(api.Options{Shutdown: func() { stopOnce.Do(func() { close(stopAsked) }) }, Caps: cgroups.Report(), Registry: reg, Hub: hub, Runtime: rt, Tasks: tasks, Checks: checks, Attempts: attempts, Journal: db.Journal(), Token: token, Logger: log,
		MCP:       mcpHandler,
		Worktrees: trees, Checkpoints: cps, Memory: notes, Claude: claude, RemoveProject: removed.Remove,
		Version: cfg.Version, StateDir: cfg.StateDir, Web: web.Handler(), SessionIdle: cfg.SessionIdle,
		SessionFile: filepath.Join(cfg.StateDir, "sessions"),
		PublicName:  cfg.PublicName, Runners: runnersFor(links, rt)})
	srv.SetAddr(addr)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return runCtx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug)}

	var wg sync.WaitGroup
	wg.Go(func() {
		if err := cgroups.Run(runCtx); err != nil {
			log.Error("cgroups' owner stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := tasks.Run(runCtx); err != nil {
			log.Error("task manager stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := rt.Run(runCtx); err != nil {
			log.Error("runtime stopped", "err", err)
			cancel()
		}
	})
	wg.Go(func() {
		if err := attempts.Run(runCtx); err != nil {
			log.Error("attempts stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := reg.Run(runCtx); err != nil {
			log.Error("project watcher stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := claude.Index.Run(runCtx); err != nil {
			log.Error("claude sessions watcher stopped", "err", err)
		}
	})
	wg.Go(func() { // the first listing finds the index warm
		if _, err := claude.Index.Sync(runCtx); err != nil && runCtx.Err() == nil {
			log.Warn("index claude sessions", "dir", claudeDir, "err", err)
		}
	})
	wg.Go(func() { retain(runCtx, log, db, reg, pruneNow) })
	if links != nil {
		wg.Go(func() {
			if err := links.rd.Run(runCtx, mcpHandler); err != nil {
				log.Error("runners' link stopped", "err", err)
			}
		})
	}
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- hs.Serve(ln) })

	for _, p := range cfg.Projects {
		if _, err := reg.Add(ctx, p); err != nil && !errors.Is(err, troupe.ErrAlreadyExists) {
			log.Error("register project", "path", p, "err", err)
		}
	}
	if err := atomicfile.Write(dir.AddrFile(), []byte(local+"\n"), 0o600); err != nil {
		cancel()
		hs.Close()
		wg.Wait()
		cgroups.Close()
		return fmt.Errorf("write address file: %w", err)
	}
	defer os.Remove(dir.AddrFile())
	hub.Publish(troupe.RuntimeKey{}, events.DaemonStarted{Addr: addr})
	fmt.Fprintf(cfg.Out, "troupe %s ready on %s\nweb UI: %s\n", cfg.Version, addr, srv.LoginURL())
	log.Info("daemon ready", "addr", addr, "state_dir", cfg.StateDir)

	var runErr error
	select {
	case <-ctx.Done():
	case <-stopAsked:
		log.Info("stop asked (troupe stop)")
	case err := <-serveErr:
		runErr = fmt.Errorf("serve api: %w", err)
	case err := <-gone:
		log.Error("database file gone: stopping", "err", err)
		runErr = fmt.Errorf("stop daemon: %w", err)
	}
	log.Info("daemon stopping")
	cancel() // ends event streams and the watcher
	shutCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer done()
	if err := hs.Shutdown(shutCtx); err != nil {
		hs.Close()
	}
	wg.Wait()
	cgroups.Close() // the agents' sessions are stopped: their cgroups go
	log.Info("daemon stopped")
	return runErr
}

// claimClaude is the runtime's claim on a Claude conversation an agent's
// session resumes (C9): refused while the conversation is live anywhere
// on the machine or held inside troupe.
func claimClaude(m *claudesessions.Machine) func(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) (func(), error) {
	return func(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) (func(), error) {
		if eng != troupe.EngineClaude {
			return nil, nil
		}
		release, err := m.ClaimForAgent(ctx, k, id)
		if err != nil {
			return nil, fmt.Errorf("resume the agent's conversation %s: %w (or start the agent afresh with `troupe reset %s`)", id, err, k.Agent)
		}
		return release, nil
	}
}

// Repair exports what is readable of the state dir's damaged database into
// a fresh one (sqlite.Repair): the damaged file is moved aside, never
// deleted. It refuses while a daemon holds the state dir's lock.
func Repair(ctx context.Context, stateDir string, log *slog.Logger) (*sqlite.RepairReport, error) {
	dir := statedir.Dir(stateDir)
	if err := dir.Check(); err != nil {
		return nil, err
	}
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return sqlite.Repair(ctx, dir.DB(), sqlite.Options{Logger: log})
}

// lock takes the state dir's exclusive lock, or explains who holds it.
func lock(dir statedir.Dir) (unlock func(), err error) {
	f, err := os.OpenFile(dir.LockFile(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(dir.LockFile())
		f.Close()
		pid := strings.TrimSpace(string(b))
		if errors.Is(err, syscall.EWOULDBLOCK) {
			// The pid in the file is the last daemon that took the lock;
			// the lock is held by whoever has the file open now (a
			// process that inherited it, say): name them when /proc can.
			held := ""
			if hs := lockHolders(dir.LockFile()); len(hs) > 0 {
				held = "; the lock file is open in " + strings.Join(hs, ", ")
			}
			return nil, fmt.Errorf("another troupe daemon (pid %s) is running on state dir %s%s: stop it first, or pass another --state-dir", pid, string(dir), held)
		}
		return nil, fmt.Errorf("lock state dir %s: %w", string(dir), err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// lockHolders names the processes that have file open, from /proc (only
// those whose fds this process may read), at most 4: "pid 123 (troupe
// serve)".
func lockHolders(file string) []string {
	procs, _ := os.ReadDir("/proc")
	var out []string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && l == file {
				cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				words, _ := clip.Ellipsis(strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")), 80)
				out = append(out, fmt.Sprintf("pid %d (%s)", pid, words))
				break
			}
		}
		if len(out) == 4 {
			break
		}
	}
	return out
}

// retain applies inbox.DefaultRetention to the conversations at start,
// every inbox.PruneEvery and at each poke of now (a project removed), until
// ctx ends.
func retain(ctx context.Context, log *slog.Logger, db *sqlite.DB, reg *project.Registry, now <-chan struct{}) {
	t := time.NewTicker(inbox.PruneEvery)
	defer t.Stop()
	for {
		// The pass begins before the list is read: a project added
		// meanwhile has no message older than the pass.
		at := time.Now()
		var live []troupe.ProjectID
		for _, p := range reg.List() {
			live = append(live, p.ID)
		}
		if n, err := db.Prune(ctx, live, inbox.DefaultRetention, at); err != nil && ctx.Err() == nil {
			log.Error("apply the retention of messages", "err", err)
		} else if n > 0 {
			log.Info("messages deleted by the retention rule", "messages", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-now:
		}
	}
}

// killTasks stops the running background tasks of a removed project.
func killTasks(ctx context.Context, log *slog.Logger, tasks *task.Manager, p troupe.ProjectID) {
	ts, err := tasks.Tasks(ctx, p)
	if err != nil {
		log.Error("list tasks of a removed project", "project", p, "err", err)
		return
	}
	for _, t := range ts {
		if t.State.Final() {
			continue
		}
		if err := tasks.Kill(ctx, p, t.ID); err != nil {
			log.Warn("kill task of a removed project", "project", p, "task", t.ID, "err", err)
		}
	}
}

// publishTask puts a task's start or end on the event feed.
func publishTask(hub *events.Hub, t task.Task) {
	k := troupe.RuntimeKey{Project: t.Project, Agent: t.Owner}
	if t.State == task.Running {
		cmd, cut := events.Clip(t.Command)
		hub.Publish(k, events.TaskStarted{ID: string(t.ID), Command: cmd, Cut: cut})
		return
	}
	hub.Publish(k, events.TaskEnded{ID: string(t.ID), State: string(t.State), ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason})
}

// keptWorktrees tells, in the log and as a worktree.kept event, of each
// agent removed from its team whose worktree (and branch) stays.
func keptWorktrees(c troupe.TeamChange, trees *worktree.Manager, hub *events.Hub, log *slog.Logger) {
	for _, name := range c.Removed {
		k := troupe.RuntimeKey{Project: c.Project, Agent: name}
		path, ok := trees.Kept(k)
		if !ok {
			continue
		}
		branch := worktree.Branch(name)
		reason := fmt.Sprintf("%s was removed from the team; its worktree %s and branch %s are kept: see troupe worktree list; troupe worktree remove %s deletes the folder", name, path, branch, name)
		log.Info("agent removed from the team; its worktree and branch are kept", "project", c.Project, "agent", name, "path", path, "branch", branch)
		hub.Publish(k, events.WorktreeKept{Path: path, Branch: branch, Reason: reason})
	}
}
