// Package cli is troupe's command line: `troupe serve` runs the daemon
// (internal/daemon); every other command talks to a running daemon through
// internal/client, found through the state dir.
//
// Conventions: every listing takes --json; errors are one line on stderr
// with a non-zero exit (Main returns the code); --project defaults to the
// registered project containing the current directory. Commands are built
// fresh per call (no global flag variables), so tests run them in-process.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/daemon"
	"github.com/troupe-dev/troupe/internal/engine/fake"
	"github.com/troupe-dev/troupe/internal/remote"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/statedir"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Version is set at build time with -ldflags "-X .../cli.Version=...".
var Version = "dev"

func version() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "fake-agent" {
		return fake.Main() // the fake engine's child: its exit status is its own
	}
	if len(args) >= 1 && args[0] == "task-supervise" {
		return task.SuperviseMain(args[1:]) // a task's supervisor, started by the daemon
	}
	if len(args) >= 1 && args[0] == sandbox.HelperCommand {
		return sandbox.HelperMain(args[1:]) // the Landlock sandbox's helper: restricts itself, then execs
	}
	return run(ctx, args, stdout, stderr, isTerminal(stdout), isTerminal(stderr))
}

// run is Main after the child programs, told whether stdout and stderr are
// terminals (tests choose).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, outTTY, errTTY bool) int {
	root, g := newRoot(stdout, stderr, outTTY, errTTY)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	g.warnVersion()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(g.errw, "troupe: "+troupe.Sentence(err.Error()))
	var u usageError
	var w stoppedWaiting
	switch {
	case errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command "):
		if cmd.HasSubCommands() {
			fmt.Fprintf(g.errw, "usage: %s COMMAND [flags] (%s --help lists the commands)\n", cmd.CommandPath(), cmd.CommandPath())
		} else {
			fmt.Fprintf(g.errw, "usage: %s (%s --help says more)\n", cmd.UseLine(), cmd.CommandPath())
		}
		return ExitUsage
	case errors.As(err, &w):
		return ExitWaited
	}
	return ExitError
}

// The exit codes of every command (README, "Exit codes").
const (
	ExitOK    = 0 // done
	ExitError = 1 // it failed: the last line on stderr says why and what to do
	ExitUsage = 2 // the command line is wrong: the usage line follows the error
	// ExitWaited: the command stopped waiting before what it waited for
	// came (ask --wait, a delegation's --wait): the request goes on, and
	// the message says where to follow it.
	ExitWaited = 3
)

// usageError is a wrong command line: arguments or flags.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// stoppedWaiting is a command that stopped waiting (ExitWaited); its text
// says what goes on and where to see it.
type stoppedWaiting struct{ msg string }

func (w stoppedWaiting) Error() string { return w.msg }

// checkArgsAsUsage makes the argument errors of c and its subcommands
// usage errors, and so do flag errors.
func checkArgsAsUsage(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if c.HasSubCommands() && !c.Runnable() {
		// A group (troupe memory, troupe task): alone, its help; with a
		// word that is none of its commands, a usage error.
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if a := c.Args; a != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := a(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, s := range c.Commands() {
		checkArgsAsUsage(s)
	}
}

// warnVersion says, once, when the daemon the command talked to runs
// another version of troupe than this CLI: answers may lack what this CLI
// expects, or hold what it does not know.
func (g *globals) warnVersion() {
	mine := version()
	for _, c := range g.clients {
		if theirs := c.DaemonVersion(); theirs != "" && theirs != mine {
			fmt.Fprintf(g.errw, "warning: the daemon runs troupe %s, this CLI is %s: restart the daemon (troupe serve) to run this version\n", theirs, mine)
			return
		}
	}
}

type globals struct {
	// stderr is standard error as it is, for troupe's own terminal
	// control (attach's line ends); errw escapes what others wrote.
	stderr   io.Writer
	stateDir string
	json     bool
	raw      bool // --raw: print agents' text to a terminal as it is
	project  string
	// out and errw are stdout and stderr for text: on a terminal, unless
	// --raw, control characters are shown escaped (safeText). stdout is
	// the stream as it is, for JSON and protocols.
	out    io.Writer
	errw   io.Writer
	stdout io.Writer
	// clients are the clients the command made: the daemon's version is
	// read from them when it ends (warnVersion).
	clients []*client.Client
}

func (g *globals) dir() (string, error) {
	if g.stateDir != "" {
		return filepath.Abs(g.stateDir)
	}
	return statedir.Default()
}

func (g *globals) client() (*client.Client, error) {
	dir, err := g.dir()
	if err != nil {
		return nil, err
	}
	c, err := client.FromStateDir(dir)
	if err == nil {
		g.clients = append(g.clients, c)
	}
	return c, err
}

// resolveProject finds --project, or the project containing the cwd.
func (g *globals) resolveProject(ctx context.Context, c *client.Client) (api.Project, error) {
	ref := g.project
	if ref == "" {
		ref = "."
	}
	if fileExists(ref) || strings.ContainsRune(ref, filepath.Separator) { // a path; otherwise try it as a project id
		ref = abs(ref) // the daemon takes absolute paths only
	}
	return c.ResolveProject(ctx, ref)
}

// projectClient is the client and the project a project command acts on.
func (g *globals) projectClient(ctx context.Context) (*client.Client, api.Project, error) {
	cl, err := g.client()
	if err != nil {
		return nil, api.Project{}, err
	}
	p, err := g.resolveProject(ctx, cl)
	return cl, p, err
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// logger is the text logger to stderr at --log-level level.
func (g *globals) logger(level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not a level: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(g.errw, &slog.HandlerOptions{Level: lv})), nil
}

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newRoot builds the commands; outTTY and errTTY tell whether stdout and
// stderr are terminals.
func newRoot(stdout, stderr io.Writer, outTTY, errTTY bool) (*cobra.Command, *globals) {
	g := &globals{stdout: stdout, stderr: stderr}
	g.out = &safeWriter{w: stdout, on: func() bool { return outTTY && !g.raw }}
	g.errw = &safeWriter{w: stderr, on: func() bool { return errTTY && !g.raw }}
	root := &cobra.Command{
		Use:           "troupe",
		Short:         "Run a team of AI coding agents on your projects",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(resetCmd(g), interruptCmd(g))
	root.AddCommand(attachCmd(g))
	root.AddCommand(permissionsCmd(g), allowCmd(g), denyCmd(g))
	root.AddCommand(diffCmd(g), mergeCmd(g), worktreeCmd(g), checkpointsCmd(g), rewindCmd(g))
	root.AddCommand(teamCmd(g), runnerCmd(g), memoryCmd(g))
	root.AddCommand(initCmd(g), profilesCmd(g), stopCmd(g), serviceCmd(g))
	root.AddCommand(sessionsCmd(g), resumeCmd(g), forkCmd(g), observeCmd(g))
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "", "daemon state directory (default $XDG_STATE_HOME/troupe or ~/.local/state/troupe)")
	root.PersistentFlags().BoolVar(&g.raw, "raw", false, "print what agents, tasks and project files wrote as it is, control characters included (on a terminal they are shown as \\xNN by default)")
	root.AddCommand(serveCmd(g), statusCmd(g), versionCmd(g), projectCmd(g), agentsCmd(g),
		runnersCmd(g), askCmd(g), delegateCmd(g), sendCmd(g), inboxCmd(g), logCmd(g), doctorCmd(g), tasksCmd(g), taskCmd(g), checkCmd(g), checksCmd(g), attemptCmd(g), attemptsCmd(g), mcpBridgeCmd(g), fakeAgentCmd(),
		fakemodelCmd(g))
	checkArgsAsUsage(root)
	return root, g
}

func serveCmd(g *globals) *cobra.Command {
	var addr, level, publicName, claudeDir, runners string
	var natsCfg daemon.NATSConfig
	var allowRemote bool
	var projects []string
	var ceiling, sessionIdle time.Duration
	var maxTasks, maxSessions, keep int
	var keepFor, runnerBeat time.Duration
	var taskMaxOutput string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon in the foreground",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			if maxTasks < 1 {
				return fmt.Errorf("--max-tasks-per-project: %d is not a limit: give 1 or more", maxTasks)
			}
			if maxSessions < 1 {
				return fmt.Errorf("--max-sessions: %d is not a limit: give 1 or more", maxSessions)
			}
			maxOutput, err := task.ParseSize(taskMaxOutput)
			if err == nil && (maxOutput < task.MinMaxOutput || maxOutput > task.MaxMaxOutput) {
				err = fmt.Errorf("give %d to %d bytes", task.MinMaxOutput, task.MaxMaxOutput)
			}
			if err != nil {
				return fmt.Errorf("--task-max-output: %w", err)
			}
			if ceiling <= 0 {
				return fmt.Errorf("--ask-ceiling: %v is not a limit: give a positive duration like 4h", ceiling)
			}
			if keep < 1 {
				return fmt.Errorf("--checkpoints-keep: %d keeps nothing: give 1 or more (the newest is always kept)", keep)
			}
			if keepFor < 0 {
				return fmt.Errorf("--checkpoints-keep-for: %v is negative: give 0 (by count alone) or a duration like 168h", keepFor)
			}
			if sessionIdle <= 0 {
				return fmt.Errorf("--session-idle: %v is not a limit: give a positive duration like 12h", sessionIdle)
			}
			log, err := g.logger(level)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return daemon.Run(ctx, daemon.Config{Addr: addr, StateDir: dir, Version: version(),
				Logger: log, Out: g.out, Projects: projects, AskCeiling: ceiling, MaxTasksPerProject: maxTasks,
				SessionIdle: sessionIdle, AllowRemote: allowRemote, PublicName: publicName,
				TaskMaxOutput: maxOutput, ClaudeDir: claudeDir, MaxSessions: maxSessions,
				CheckpointsKeep: keep, CheckpointsKeepFor: keepFor, Runners: runners, RunnerBeat: runnerBeat, NATS: natsCfg})
		},
	}
	c.Flags().StringVar(&addr, "addr", daemon.DefaultAddr, "address to listen on; beyond loopback it needs --allow-remote")
	c.Flags().BoolVar(&allowRemote, "allow-remote", false, "let --addr be beyond loopback (anyone reaching it with the token drives your agents)")
	c.Flags().StringVar(&publicName, "public-name", "", "with --allow-remote: the host name browsers use to reach this machine (Host and Origin are checked against it)")
	c.Flags().StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	c.Flags().StringArrayVar(&projects, "project", nil, "register this folder at start if it is not registered yet (repeatable)")
	c.Flags().DurationVar(&ceiling, "ask-ceiling", 4*time.Hour, "absolute limit of an ask, however active its target")
	c.Flags().IntVar(&maxTasks, "max-tasks-per-project", 8, "background tasks one project may run at once")
	c.Flags().IntVar(&maxSessions, "max-sessions", daemon.DefaultMaxSessions, "agent sessions (engine processes) live at once, all projects together; the others wait for a slot")
	c.Flags().IntVar(&keep, "checkpoints-keep", daemon.DefaultCheckpointsKeep, "checkpoints of each agent kept beyond --checkpoints-keep-for (the newest first)")
	c.Flags().DurationVar(&keepFor, "checkpoints-keep-for", daemon.DefaultCheckpointsKeepFor, "every checkpoint younger than this is kept, whatever --checkpoints-keep says")
	c.Flags().StringVar(&taskMaxOutput, "task-max-output", "64MB", "output a background task keeps unless it is given its own cap: its first half and its last half, the middle cut")
	c.Flags().DurationVar(&sessionIdle, "session-idle", api.DefaultSessionIdle, "log a browser out after this long without a request")
	c.Flags().StringVar(&runners, "runners", "", "let runners on other machines connect here (HOST:PORT; TLS beyond loopback): troupe embeds a NATS server, its store in the state dir (or --nats: an existing cluster)")
	c.Flags().StringVar(&natsCfg.URLs, "nats", "", "instead of --runners: the runners' bus is this existing NATS cluster (URL[,URL…]; JetStream on), the daemon a user of it (--nats-creds)")
	c.Flags().StringVar(&natsCfg.Creds, "nats-creds", "", "with --nats: the daemon's NATS credentials file (user JWT and seed, as nsc writes it); the runners share its account")
	c.Flags().StringVar(&natsCfg.SigningKey, "nats-signing-key", "", "with --nats: the seed (SA…) of a signing key of that account: troupe runner add mints runners' users with it (valid 30 days)")
	c.Flags().StringVar(&natsCfg.CA, "nats-ca", "", "with --nats: the PEM of the CA of the cluster's TLS certificates; it goes into the runners' credentials too")
	c.Flags().DurationVar(&runnerBeat, "runner-beat", remote.DefaultBeat, "how often runners say they are alive; one silent for 3 beats is unreachable")
	_ = c.Flags().MarkHidden("runner-beat")
	c.Flags().StringVar(&claudeDir, "claude-dir", "", "Claude Code's config folder whose sessions 'troupe sessions' lists (default $CLAUDE_CONFIG_DIR, else ~/.claude)")
	return c
}

func statusCmd(g *globals) *cobra.Command {
	var login bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show whether the daemon runs, and what it holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			var st api.Status
			if err == nil {
				st, err = cl.Status(cmd.Context())
			}
			if errors.Is(err, client.ErrNotRunning) && g.json {
				// Still JSON, for a script: not running, where it looked.
				dir, _ := g.dir()
				if perr := g.printJSON(api.Status{StateDir: dir}); perr != nil {
					return perr
				}
			}
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(st)
			}
			fmt.Fprintf(g.out, "troupe daemon %s running (pid %d) on %s\nstate dir: %s\nprojects: %d, agents: %d\n",
				st.Version, st.PID, st.Addr, st.StateDir, st.Projects, st.Agents)
			if login {
				u, err := cl.LoginLink(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "web UI: %s\n", u)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().BoolVar(&login, "login", false, "also print a new one-time login link for the web UI")
	return c
}

func versionCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "version",
		Short: "Print troupe's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.json {
				return g.printJSON(map[string]string{"version": version()})
			}
			fmt.Fprintln(g.out, "troupe", version())
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return c
}

func projectCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "project", Short: "Register, list and remove projects"}
	add := &cobra.Command{
		Use:   "add [PATH]",
		Short: "Register a folder as a project (default: the current directory)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.AddProject(cmd.Context(), abs(path))
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(p)
			}
			fmt.Fprintf(g.out, "registered %s as project %s (%s)\n", p.Path, p.ID, plural(p.Agents, "agent", "agents"))
			if len(p.Grants) > 0 {
				fmt.Fprintln(g.out, "you approve these grants (a later change to the team file that widens one waits for troupe team approve):")
				for _, a := range p.Grants {
					fmt.Fprintf(g.out, "agent %s\n", a.Agent)
					printGrants(g.out, a.Grants)
				}
			}
			if p.TeamError != "" {
				fmt.Fprintf(g.errw, "warning: team not loaded, so not approved: %s (fix it, then review it with troupe team diff and approve it with troupe team approve)\n", p.TeamError)
			}
			return nil
		},
	}
	add.Flags().BoolVar(&g.json, "json", false, "print JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List registered projects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			ps, err := cl.Projects(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"projects": ps})
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tAGENTS\tPATH\tTEAM")
			for _, p := range ps {
				team := p.Team
				if p.TeamError != "" {
					team = "error: " + p.TeamError
				}
				if p.TeamHeld {
					team += " (change held: troupe team diff)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.ID, p.Name, p.Agents, p.Path, team)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&g.json, "json", false, "print JSON")
	remove := &cobra.Command{
		Use:   "remove [PATH|ID]",
		Short: "Unregister a project (its folder is left untouched; its agents' clean worktrees are removed, branches kept)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				g.project = args[0]
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.RemoveProjectReport(cmd.Context(), p.ID)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"project": p, "worktrees": res.Worktrees})
			}
			fmt.Fprintf(g.out, "removed project %s (%s)\n", p.ID, p.Path)
			printRemovedWorktrees(g, res)
			return nil
		},
	}
	remove.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.AddCommand(add, list, remove)
	return c
}

func agentsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "agents",
		Short: "List a project's team with each agent's state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			as, err := cl.Agents(cmd.Context(), p.ID)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"agents": as})
			}
			if p.TeamError != "" {
				fmt.Fprintf(g.errw, "warning: team file not loaded, showing the last good team: %s\n", p.TeamError)
			}
			none := ""
			// RUNNER only for a team with an agent on a runner.
			remote := slices.ContainsFunc(as, func(a api.Agent) bool { return a.Runner != "" || len(a.RunnerLabels) > 0 })
			runnerCol := ""
			if remote {
				runnerCol = "\tRUNNER"
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tENGINE\tMODE\tSTATE\tTURN TIMEOUT\tSESSION\tSANDBOX\tCHECKPOINTS"+runnerCol+"\tWHY")
			for _, a := range as {
				st := string(a.State)
				// The reason or what it does, last and cut: a failed
				// agent's reason no longer widens every column.
				why := "-"
				switch {
				case a.Reason != "":
					why = oneLine(safeText(a.Reason), maxWhy)
				case a.Doing != "":
					why = fmt.Sprintf("%s for %s", oneLine(safeText(a.Doing), maxWhy), time.Since(a.DoingSince).Round(time.Second))
				}
				sess := a.SessionID
				if sess == "" {
					sess = "-"
				}
				sbx := "on"
				if !a.Sandboxed {
					sbx = "OFF (unsandboxed)"
				} else if c := a.Caps; c != nil && !c.InForce {
					sbx = "on, caps off"
				} else if c != nil {
					sbx = fmt.Sprintf("on, memory %s, processes %s", c.Memory, c.Processes)
				}
				cps := "on"
				if a.Checkpoints != "" {
					cps, none = "none (not a git repository)", a.Checkpoints
				}
				where := ""
				if remote {
					where = "\t" + runsOn(a)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\t%s\n", a.Name, a.Engine, a.Mode, st, fmtDuration(a.TurnTimeout), sess, sbx, cps, where, why)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if none != "" {
				fmt.Fprintf(g.errw, "no checkpoints of the agents' files: %s\n", strings.TrimPrefix(none, "none: "))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// maxWhy bounds the WHY column of troupe agents (characters, "…" where cut):
// troupe agents --json, troupe log and the web UI give the whole reason.
const maxWhy = 72

// runsOn says where an agent runs: its runner, "local", or the labels it
// waits for a runner with.
func runsOn(a api.Agent) string {
	switch {
	case a.Runner != "":
		return a.Runner
	case len(a.RunnerLabels) > 0:
		return "none yet (labels " + strings.Join(a.RunnerLabels, ",") + ")"
	}
	return "local"
}

func fmtDuration(d api.Duration) string {
	b, _ := d.MarshalText()
	return string(b)
}
