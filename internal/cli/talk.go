package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func askCmd(g *globals) *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "ask AGENT TEXT...",
		Short: "Ask an agent a question and print its answer",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			req, err := cl.Ask(cmd.Context(), p.ID, troupe.AgentID(args[0]), strings.Join(args[1:], " "), wait.Seconds())
			if err != nil {
				return err
			}
			if g.json {
				if err := g.printJSON(req); err != nil {
					return err
				}
			} else if req.State == troupe.ReqAnswered {
				fmt.Fprintln(g.out, req.Answer)
			}
			switch req.State {
			case troupe.ReqAnswered:
				return nil
			case troupe.ReqPending:
				// Stopped waiting: the question goes on (exit code 3).
				switch {
				case req.Unreachable != "":
					return stoppedWaiting{fmt.Sprintf("%s is %s: your question stays in its inbox and runs when its runner is back; the request is %s: see it with `troupe inbox %s`",
						args[0], req.Unreachable, req.ID, args[0])}
				case !req.LimitedUntil.IsZero():
					return stoppedWaiting{fmt.Sprintf("%s is limited until %s (its engine's usage limit): your question stays in its inbox and runs then; the request is %s: see it with `troupe inbox %s`",
						args[0], req.LimitedUntil.Local().Format("15:04:05"), req.ID, args[0])}
				}
				return stoppedWaiting{fmt.Sprintf("%s has not answered within %v; the request is %s: see it with `troupe inbox %s`", args[0], wait, req.ID, args[0])}
			}
			return fmt.Errorf("%s (request %s)", req.Error, req.ID)
		},
	}
	c.Flags().DurationVar(&wait, "wait", 0, "stop waiting after this long (0: wait for the answer)")
	c.Flags().BoolVar(&g.json, "json", false, "print the request as JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// delegateCmd is `troupe delegate AGENT TASK...`: the person delegates a
// task, checked by one of the project's checks with --verify.
func delegateCmd(g *globals) *cobra.Command {
	var wait time.Duration
	var verify string
	var tries int
	c := &cobra.Command{
		Use:   "delegate AGENT TASK...",
		Short: "Give an agent a task; with --verify troupe checks its work before you get its answer",
		Long: "Give AGENT a task and return (or wait for its result with --wait). With --verify NAME, troupe runs\n" +
			"check NAME of the project ([checks] in team.toml) on the agent's workspace when its turn ends: a failure\n" +
			"goes back to the agent with the check's output while --tries are left, and the result starts with\n" +
			"troupe's verdict. Exits 1 when the delegation failed (its check too), 3 when --wait ended first, 0 otherwise.",
		Example: `  troupe delegate dev "make go test pass in ./internal/add" --verify test --wait 30m`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("delegate takes the agent and the task, like: troupe delegate dev \"fix the build\" --verify test")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			agent := troupe.AgentID(args[0])
			req, err := cl.Delegate(cmd.Context(), p.ID, agent, api.DelegateRequest{Text: strings.Join(args[1:], " "),
				Verify: troupe.CheckName(verify), Tries: tries})
			if err != nil {
				return err
			}
			if wait > 0 {
				if req, err = cl.Request(cmd.Context(), p.ID, req.ID, wait.Seconds()); err != nil {
					return err
				}
			}
			if g.json {
				if err := g.printJSON(req); err != nil {
					return err
				}
			} else if req.State == troupe.ReqPending {
				how := ""
				if req.Verify != "" {
					how = fmt.Sprintf(", verified by check %s (%d tries)", req.Verify, req.Tries)
				}
				fmt.Fprintf(g.out, "delegated to %s as request %s%s; its result comes to your inbox: troupe inbox %s\n", agent, req.ID, how, agent)
			} else {
				fmt.Fprintln(g.out, req.Outcome().Text)
			}
			if req.State != troupe.ReqPending && req.State != troupe.ReqAnswered {
				return fmt.Errorf("delegation %s to %s %s", req.ID, agent, req.State)
			}
			if req.State == troupe.ReqPending && wait > 0 {
				return stoppedWaiting{fmt.Sprintf("%s has not finished within %v; the delegation %s goes on: its result comes to your inbox (troupe inbox %s)", agent, wait, req.ID, agent)}
			}
			return nil
		},
	}
	c.Flags().StringVar(&verify, "verify", "", "a check of the project that judges the work (troupe checks lists the checks run)")
	c.Flags().IntVar(&tries, "tries", 0, fmt.Sprintf("with --verify: the agent's turns the check may judge, 1 to %d (default %d; 1: no retry)", troupe.MaxVerifyTries, troupe.DefaultVerifyTries))
	c.Flags().DurationVar(&wait, "wait", 0, "wait this long for the result and print it (0: return at once)")
	c.Flags().BoolVar(&g.json, "json", false, "print the request as JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func sendCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "send AGENT TEXT...",
		Short: "Put a message into an agent's inbox (it reads it at its next turn)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			m, err := cl.Send(cmd.Context(), p.ID, troupe.AgentID(args[0]), strings.Join(args[1:], " "))
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(m)
			}
			fmt.Fprintf(g.out, "queued message %d for %s\n", m.ID, args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the message as JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func inboxCmd(g *globals) *cobra.Command {
	var limit int
	var before, show int64
	c := &cobra.Command{
		Use:   "inbox [AGENT]",
		Short: "List the newest messages of an agent's conversation (or of the whole project)",
		Long: "List the newest messages of an agent's conversation (or of the whole project), oldest first.\n" +
			"Only what is printed is fetched; --before pages back. A page clips each text at 64 KB and holds\n" +
			"at most 4 MB; --show ID prints one message whole.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if show != 0 {
				return showMessage(cmd, g, show)
			}
			if limit < 1 || limit > api.MaxMessages {
				return fmt.Errorf("--limit %d: give 1 to %d (page back with --before)", limit, api.MaxMessages)
			}
			if before < 0 {
				return fmt.Errorf("--before %d: give a message id", before)
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			var agent troupe.AgentID
			if len(args) == 1 {
				agent = troupe.AgentID(args[0])
			}
			page, err := cl.Conversation(cmd.Context(), p.ID, agent, before, limit)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(page)
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tFROM\tTO\tKIND\tSTATE\tTEXT")
			for _, m := range page.Messages {
				st := string(m.State)
				if m.Redelivered {
					st += " (redelivered)"
				}
				if m.Reason != "" {
					st += ": " + m.Reason
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.CreatedAt.Local().Format("15:04:05"),
					m.From, m.To, m.Kind, st, clipped(m))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Before > 0 {
				fmt.Fprintf(g.errw, "older messages: %s\n", strings.Join(slices.Concat([]string{"troupe", "inbox"}, args,
					[]string{"--before", strconv.FormatInt(page.Before, 10)}), " "))
			}
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", api.DefaultMessages, fmt.Sprintf("show the newest N messages (1 to %d)", api.MaxMessages))
	c.Flags().Int64Var(&before, "before", 0, "show those older than this message id (the line after the list gives it)")
	c.Flags().Int64Var(&show, "show", 0, "print the message with this id whole (its text, read a part at a time)")
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// clipped is m's text on one line of the list, with its size when the
// page clipped it.
func clipped(m troupe.Message) string {
	if !m.Clipped {
		return oneLine(m.Text, 80)
	}
	return fmt.Sprintf("(%d bytes: --show %d) %s", m.Size, m.ID, oneLine(m.Text, 60))
}

// showMessage prints message id of the project whole: a header line,
// then its text.
func showMessage(cmd *cobra.Command, g *globals, id int64) error {
	cl, p, err := g.projectClient(cmd.Context())
	if err != nil {
		return err
	}
	m, err := cl.WholeMessage(cmd.Context(), p.ID, id)
	if err != nil {
		return err
	}
	if g.json {
		return g.printJSON(m)
	}
	fmt.Fprintf(g.out, "message %d %s from %s to %s, %s (%d bytes)\n%s\n", m.ID, m.CreatedAt.Local().Format(time.DateTime),
		m.From, m.To, m.Kind, len(m.Text), m.Text)
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// fakeAgentCmd documents the fake engine's child program; Main runs it
// before cobra so that its exit status and stderr are its own.
func fakeAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "fake-agent",
		Short:  "Run the scripted fake agent on stdin/stdout (started by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("fake-agent takes no flags: the daemon starts it as `troupe fake-agent`")
		},
	}
}
