package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/claudefmt"
	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func sessionsCmd(g *globals) *cobra.Command {
	var q client.ClaudeQuery
	c := &cobra.Command{
		Use:   "sessions",
		Short: "List the Claude Code sessions of this machine, newest first, live ones marked",
		Long: "List the Claude Code sessions of this machine (from ~/.claude/projects, or $CLAUDE_CONFIG_DIR), newest first.\n" +
			"A session is live while a Claude Code process runs it; a live one can be observed or forked, never resumed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Project != "" {
				q.Project = abs(q.Project)
			}
			l, err := g.claudeSessions(cmd.Context(), q)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(l)
			}
			for _, u := range l.Unreadable {
				fmt.Fprintf(g.errw, "warning: registry file unreadable while its process may run, no session can be proved dead: %s\n", u)
			}
			if len(l.Sessions) == 0 {
				fmt.Fprintln(g.out, "no Claude Code sessions found")
				return nil
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tLAST\tMSGS\tSTATE\tFOLDER\tTITLE")
			for _, s := range l.Sessions {
				state := "dead"
				if s.Live {
					state = "live"
					if s.Status != "" {
						state += " " + s.Status
					}
				}
				if s.HeldBy != "" && !s.Live {
					state = "held"
				}
				folder := s.Cwd
				if !s.CwdExists {
					folder += " (gone)"
				}
				title := s.Title
				if s.Agent != nil {
					title = "[troupe " + string(s.Agent.Agent) + "] " + title
				}
				msgs := fmt.Sprint(s.Messages)
				if s.MessagesPartial {
					msgs = "≥" + msgs // still being counted
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, when(s.Last), msgs, state, folder, oneLine(title, 70))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if l.Total > len(l.Sessions) {
				fmt.Fprintf(g.out, "%d more: use --limit 0 or --search\n", l.Total-len(l.Sessions))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&q.Live, "live", false, "live sessions only")
	c.Flags().StringVar(&q.Project, "project", "", "sessions that started in this folder or inside it")
	c.Flags().StringVar(&q.Search, "search", "", "sessions whose title, first prompt, folder or id holds this text")
	c.Flags().IntVar(&q.Limit, "limit", 50, "show at most this many (0: all)")
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return c
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

func resumeCmd(g *globals) *cobra.Command {
	var bin, as string
	c := &cobra.Command{
		Use:   "resume ID [-- CLAUDE-ARGS...]",
		Short: "Carry on a dead Claude Code session in its own folder (a live one is refused: fork or observe it)",
		Long: "Runs `claude --resume ID` in the folder the session started in, attached to this terminal.\n" +
			"A live session (a Claude Code process runs it) is refused: two writers would interleave one transcript;\n" +
			"`troupe fork ID` carries on a copy, `troupe observe ID` follows it. Arguments after -- go to claude.\n" +
			"With --as AGENT the session is handed to a Claude agent of the project instead: its next session resumes it.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, extra := args[0], args[1:]
			if as != "" {
				cl, p, err := g.projectClient(cmd.Context())
				if err != nil {
					return err
				}
				s, err := cl.HandOffClaudeSession(cmd.Context(), id, p.ID, troupe.AgentID(as))
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "session %s handed to agent %s of %s: its next session resumes it (the session started in %s)\n", s.ID, as, p.Path, s.Cwd)
				return nil
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			claim, err := cl.ClaimClaudeSession(cmd.Context(), id, os.Getpid())
			if err != nil {
				return err
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
				defer cancel()
				if err := cl.ReleaseClaudeSession(ctx, id, claim.Claim); err != nil {
					fmt.Fprintf(g.errw, "warning: release the claim on session %s: %v (it ends with this process anyway)\n", id, err)
				}
			}()
			if err := folderThere(claim.Session); err != nil {
				return err
			}
			return runClaude(cmd, g, bin, claim.Session.Cwd, append([]string{"--resume", id}, extra...))
		},
	}
	c.Flags().StringVar(&bin, "claude", "claude", "the Claude Code command to run")
	c.Flags().StringVar(&as, "as", "", "hand the session to this Claude agent of the project instead (its next session resumes it)")
	c.Flags().StringVar(&g.project, "project", "", "with --as: project path or id (default: the project containing the current directory)")
	return c
}

func forkCmd(g *globals) *cobra.Command {
	var bin string
	c := &cobra.Command{
		Use:   "fork ID [-- CLAUDE-ARGS...]",
		Short: "Carry on a copy of a Claude Code session (live or not) under a new id, in its own folder; the original is untouched",
		Long: "Runs `claude --resume ID --fork-session` in the folder the session started in, attached to this terminal:\n" +
			"a new session with the whole history, while the original (even a live one) is left as it is. Arguments after -- go to claude.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, extra := args[0], args[1:]
			cl, err := g.client()
			if err != nil {
				return err
			}
			s, err := cl.ClaudeSession(cmd.Context(), id)
			if err != nil {
				return err
			}
			if err := folderThere(s); err != nil {
				return err
			}
			return runClaude(cmd, g, bin, s.Cwd, append([]string{"--resume", id, "--fork-session"}, extra...))
		},
	}
	c.Flags().StringVar(&bin, "claude", "claude", "the Claude Code command to run")
	return c
}

// folderThere refuses a session whose folder is gone, saying so.
func folderThere(s api.ClaudeSession) error {
	if s.Cwd == "" {
		return fmt.Errorf("session %s: its transcript names no folder (no conversation line with a cwd): it cannot be resumed in its own folder", s.ID)
	}
	fi, err := os.Stat(s.Cwd)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("session %s started in %s, which is no longer a folder: troupe resumes a session only in its own folder; recreate it (mkdir -p %s) or restore it, then run this again", s.ID, s.Cwd, s.Cwd)
	}
	return nil
}

// runClaude runs the person's claude in dir, attached to this terminal:
// it stays in troupe's process group (the terminal's foreground group, so
// it can read the keyboard); troupe ignores Ctrl-C meanwhile (claude takes
// it) and waits for it. The environment is the person's, less the
// variables that say a Claude Code session is the parent (C11).
func runClaude(cmd *cobra.Command, g *globals, bin, dir string, args []string) error {
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("find the claude command %q: %w: install Claude Code or pass --claude PATH", bin, err)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(ch)
	c := exec.Command(path, args...)
	c.Dir = dir
	c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), g.stdout, cmd.ErrOrStderr()
	c.Env = childEnv(os.Environ())
	// The folder comes from the transcript: shown through errw, which
	// neutralises escape sequences on a terminal (claude's own output
	// is its TUI's and goes straight through).
	fmt.Fprintf(g.errw, "troupe: running %s %s in %s\n", bin, strings.Join(args, " "), dir)
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("claude exited with status %d", ee.ExitCode())
		}
		return fmt.Errorf("run claude: %w", err)
	}
	return nil
}

// childEnv is env less the variables a parent Claude Code session sets.
func childEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "CLAUDECODE=") || strings.HasPrefix(kv, "CLAUDE_CODE_ENTRYPOINT=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func observeCmd(g *globals) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "observe ID",
		Short: "Follow a Claude Code session's transcript as it grows (read only), until Ctrl-C",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			cl, err := g.client()
			if err != nil {
				return err
			}
			s, err := cl.ClaudeSession(cmd.Context(), id)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			state := "dead"
			if s.Live {
				state = "live"
			}
			fmt.Fprintf(g.out, "observing %s (%s) in %s: %s\n", s.ID, state, s.Cwd, oneLine(s.Title, 80))
			var offset int64
			if !all {
				offset = s.Size
			}
			live := s.Live
			for ctx.Err() == nil {
				t, err := cl.ClaudeTranscript(ctx, id, offset, 20*time.Second)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					return err
				}
				for _, e := range t.Entries {
					printEntry(g.out, e.Time, e.Role, e.Text)
				}
				if t.Skipped > 0 {
					fmt.Fprintf(g.out, "(%s not shown: not JSON, foreign or too long)\n", plural(t.Skipped, "line", "lines"))
				}
				if t.Live != live {
					live = t.Live
					if live {
						fmt.Fprintln(g.out, "-- the session is live again")
					} else {
						fmt.Fprintln(g.out, "-- the session is no longer live (its process ended); still watching, Ctrl-C to stop")
					}
				}
				offset = t.Next
			}
			return nil
		},
	}
	c.Flags().BoolVar(&all, "all", false, "show the transcript from its start, not only what comes next")
	return c
}

func printEntry(w io.Writer, at time.Time, role, text string) {
	ts := "--:--:--"
	if !at.IsZero() {
		ts = at.Local().Format("15:04:05")
	}
	fmt.Fprintf(w, "[%s] %s: %s\n", ts, role, strings.TrimRight(text, "\n"))
}

// claudeSessions lists the machine's Claude sessions through the daemon,
// or, when none runs, by reading Claude Code's folder here ($CLAUDE_CONFIG_DIR,
// else ~/.claude): the same listing, without what only the daemon knows
// (which troupe agent ran a session, which are held), as a line on stderr
// says.
func (g *globals) claudeSessions(ctx context.Context, q client.ClaudeQuery) (api.ClaudeSessionList, error) {
	cl, err := g.client()
	if err == nil {
		l, err := cl.ClaudeSessions(ctx, q)
		if !errors.Is(err, client.ErrNotRunning) {
			return l, err
		}
	} else if !errors.Is(err, client.ErrNotRunning) {
		return api.ClaudeSessionList{}, err
	}
	dir, err := claudefmt.ConfigDir(os.Getenv)
	if err != nil {
		return api.ClaudeSessionList{}, fmt.Errorf("list Claude sessions: %w", err)
	}
	fmt.Fprintf(g.errw, "(the daemon is not running: read %s here; which sessions troupe's agents ran is not shown)\n", dir)
	m := claudesessions.NewMachine(claudesessions.MachineOptions{Dir: dir})
	l, err := m.List(ctx, claudesessions.Query{Live: q.Live, Project: q.Project, Search: q.Search, Limit: q.Limit})
	if err != nil {
		return api.ClaudeSessionList{}, fmt.Errorf("list Claude sessions: %w", err)
	}
	return api.ClaudeListing(l), nil
}
