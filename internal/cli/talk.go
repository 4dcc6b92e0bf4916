package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
				return g.printJSON(req)
			}
			switch req.State {
			case troupe.ReqAnswered:
				fmt.Fprintln(g.out, req.Answer)
				return nil
			case troupe.ReqPending:
				fmt.Fprintf(g.out, "%s has not answered within %v; the request is %s: see it with `troupe inbox %s`\n", args[0], wait, req.ID, args[0])
				return nil
			}
			return fmt.Errorf("%s (request %s)", req.Error, req.ID)
		},
	}
	c.Flags().DurationVar(&wait, "wait", 0, "stop waiting after this long (0: wait for the answer)")
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
	c := &cobra.Command{
		Use:   "inbox [AGENT]",
		Short: "List the conversation of an agent (or of the whole project)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			var agent troupe.AgentID
			if len(args) == 1 {
				agent = troupe.AgentID(args[0])
			}
			ms, err := cl.Messages(cmd.Context(), p.ID, agent, 0, 0)
			if err != nil {
				return err
			}
			if limit > 0 && len(ms) > limit {
				ms = ms[len(ms)-limit:]
			}
			if g.json {
				return g.printJSON(ms)
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tFROM\tTO\tKIND\tSTATE\tTEXT")
			for _, m := range ms {
				st := string(m.State)
				if m.Redelivered {
					st += " (redelivered)"
				}
				if m.Reason != "" {
					st += ": " + m.Reason
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.CreatedAt.Local().Format("15:04:05"),
					m.From, m.To, m.Kind, st, oneLine(m.Text, 80))
			}
			return tw.Flush()
		},
	}
	c.Flags().IntVar(&limit, "limit", 50, "show at most the last N messages (0: all)")
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
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
