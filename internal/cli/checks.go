package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// checkCmd is `troupe check AGENT NAME`: run one of the project's checks
// on an agent's workspace by hand.
func checkCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "check AGENT NAME",
		Short: "Run one of the project's checks ([checks] in team.toml) on an agent's workspace",
		Long: "Run check NAME of the approved team on AGENT's workspace (its worktree, or the project folder),\n" +
			"in its sandbox, and print the verdict and the end of the output. Exits 0 when the check passed,\n" +
			"1 when it failed, timed out or could not run. The result is kept (troupe checks).",
		Example: `  troupe check dev test`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("check takes the agent and the check's name, like: troupe check dev test")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			r, err := cl.RunCheck(cmd.Context(), p.ID, troupe.AgentID(args[0]), troupe.CheckName(args[1]))
			if err != nil {
				return err
			}
			if g.json {
				if err := g.printJSON(r); err != nil {
					return err
				}
			} else {
				if r.Output != "" {
					fmt.Fprint(g.out, r.Output)
					if !strings.HasSuffix(r.Output, "\n") {
						fmt.Fprintln(g.out)
					}
				}
				if r.OutputCut != "" {
					fmt.Fprintf(g.out, "(%s)\n", r.OutputCut)
				}
				fmt.Fprintln(g.out, verdict(r))
			}
			if !r.Passed() {
				return fmt.Errorf("check %s of %s: %s", r.Check, r.Agent, r.State)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// verdict is one line saying how a check run went, like "check test of
// dev: FAILED (exit 1, in 2.1s, turn t-3)".
func verdict(r api.CheckResult) string {
	var parts []string
	if r.ExitCode >= 0 {
		parts = append(parts, fmt.Sprintf("exit %d", r.ExitCode))
	}
	parts = append(parts, "in "+(time.Duration(r.DurationMS)*time.Millisecond).String())
	if r.Turn != "" {
		parts = append(parts, "turn "+string(r.Turn))
	}
	s := fmt.Sprintf("check %s of %s: %s (%s)", r.Check, r.Agent, strings.ToUpper(strings.ReplaceAll(string(r.State), "_", " ")), strings.Join(parts, ", "))
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// checksCmd is `troupe checks [AGENT]`: the results kept.
func checksCmd(g *globals) *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:   "checks [AGENT]",
		Short: "List the results of the project's checks, newest first",
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
			rs, err := cl.CheckResults(cmd.Context(), p.ID, agent, limit)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"checks": rs})
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGENT\tCHECK\tSTATE\tEXIT\tTOOK\tTURN\tSTARTED\tCOMMAND")
			for _, r := range rs {
				exit := ""
				if r.ExitCode >= 0 {
					exit = fmt.Sprint(r.ExitCode)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Agent, r.Check, r.State, exit,
					(time.Duration(r.DurationMS) * time.Millisecond).String(), r.Turn, r.StartedAt.Local().Format("15:04:05"), oneLine(r.Command, 50))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many results (default and most: 200)")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}
