package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// outputLines is how many of a member's check output lines `troupe
// attempt show` prints (--json has the kept tail).
const outputLines = 12

// attemptCmd is `troupe attempt "TASK" --agents a,b,c`, with show and
// discard.
func attemptCmd(g *globals) *cobra.Command {
	var agents []string
	var checkName string
	var wait bool
	c := &cobra.Command{
		Use:   `attempt "TASK" --agents A,B,C [--check NAME]`,
		Short: "Give one task to several worktree agents from the same base and rank their work by a check",
		Long: "Give TASK to each of the named worktree agents (at most 8), each starting from the project's\n" +
			"current HEAD in its own worktree; when each is done troupe runs the check (--check, or the\n" +
			"project's only check) on its worktree and ranks them: the check passed first, then a change\n" +
			"before none, the smaller change, the shorter time, the lower cost. Merge the winner with\n" +
			"troupe merge AGENT; drop the others' work with troupe attempt discard ID --yes.",
		Example: "  troupe attempt 'make the tests pass' --agents claude,codex,opencode\n" +
			"  troupe attempt 'fix the parser' --agents a,b --check test --wait\n" +
			"  troupe attempt show 3\n  troupe attempts",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New(`attempt takes the task as one argument, like: troupe attempt "make the tests pass" --agents a,b,c`)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(agents) == 0 {
				return errors.New("name the agents with --agents, like --agents a,b,c (worktree agents: troupe worktree list)")
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			req := api.AttemptRequest{Task: args[0], Check: troupe.CheckName(checkName)}
			for _, a := range agents {
				req.Agents = append(req.Agents, troupe.AgentID(strings.TrimSpace(a)))
			}
			var since uint64
			if wait { // the feed's position before the start: no event of the attempt is missed
				st, err := cl.Status(cmd.Context())
				if err != nil {
					return err
				}
				since = st.LastEvent
			}
			a, err := cl.StartAttempt(cmd.Context(), p.ID, req)
			if err != nil {
				return err
			}
			if wait {
				if a, err = waitDone(cmd.Context(), cl, a, since); err != nil {
					return err
				}
			}
			if g.json {
				return g.printJSON(a)
			}
			if !wait {
				fmt.Fprintf(g.out, "attempt %d started: %d agents from %s, judged by check %s\n", a.ID, len(a.Members), short(a.Base), a.Check)
				fmt.Fprintf(g.out, "follow it: troupe attempt show %d\n", a.ID)
				return nil
			}
			printAttempt(g.out, a)
			return nil
		},
	}
	c.Flags().StringSliceVar(&agents, "agents", nil, "the worktree agents to give the task to, comma-separated (at most 8)")
	c.Flags().StringVar(&checkName, "check", "", "the check that judges the work (default: the project's only check)")
	c.Flags().BoolVar(&wait, "wait", false, "wait for every agent and its check, then print the comparison")
	c.Flags().BoolVar(&g.json, "json", false, "print the attempt as JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Compare an attempt's agents side by side: rank, verdict, change, time, cost, check output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseAttemptID(args[0])
			if err != nil {
				return err
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			a, err := cl.Attempt(cmd.Context(), p.ID, id)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(a)
			}
			printAttempt(g.out, a)
			return nil
		},
	}
	var yes bool
	discard := &cobra.Command{
		Use:   "discard ID --yes",
		Short: "Reset the worktrees of an attempt's losers (all but the winner), dropping their work",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseAttemptID(args[0])
			if err != nil {
				return err
			}
			if !yes {
				return errors.New("this drops the work of the attempt's losers in their worktrees: run again with --yes")
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			r, err := cl.DiscardAttempt(cmd.Context(), p.ID, id)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(r)
			}
			for _, a := range r.Reset {
				fmt.Fprintf(g.out, "%s: worktree reset to its base\n", a)
			}
			if r.Attempt.Winner != "" {
				fmt.Fprintf(g.out, "kept the winner's work: troupe merge %s\n", r.Attempt.Winner)
			}
			return nil
		},
	}
	discard.Flags().BoolVar(&yes, "yes", false, "drop the losers' work")
	for _, s := range []*cobra.Command{show, discard} {
		s.Flags().BoolVar(&g.json, "json", false, "print JSON")
		s.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	}
	c.AddCommand(show, discard)
	return c
}

// waitDone follows the event feed from since until attempt a is done and
// returns it as then read.
func waitDone(ctx context.Context, cl *client.Client, a api.Attempt, since uint64) (api.Attempt, error) {
	stop := errors.New("done")
	read := func() (bool, error) {
		got, err := cl.Attempt(ctx, a.Project, int64(a.ID))
		if err != nil {
			return false, err
		}
		a = got
		return a.State == attempt.Done, nil
	}
	if done, err := read(); err != nil || done {
		return a, err
	}
	_, err := cl.Events(ctx, since, nil, func(ev events.Event) error {
		if ev.Type != events.TypeAttemptChanged || ev.Project != a.Project {
			return nil
		}
		var c events.AttemptChanged
		if json.Unmarshal(ev.Data, &c) != nil || c.ID != int64(a.ID) || c.State != string(attempt.Done) {
			return nil
		}
		if done, err := read(); err != nil {
			return err
		} else if done {
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		return a, nil
	}
	return a, fmt.Errorf("wait for attempt %d: %w (the attempt goes on: troupe attempt show %d)", a.ID, err, a.ID)
}

func parseAttemptID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not an attempt's number: troupe attempts lists them", s)
	}
	return n, nil
}

// attemptsCmd is `troupe attempts`: the project's attempts, newest first.
func attemptsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "attempts",
		Short: "List the project's attempts, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			as, err := cl.Attempts(cmd.Context(), p.ID, 0)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"attempts": as})
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tAGENTS\tCHECK\tWINNER\tSTARTED\tTASK")
			for _, a := range as {
				names := make([]string, len(a.Members))
				for i, m := range a.Members {
					names[i] = string(m.Agent)
				}
				winner := string(a.Winner)
				if winner == "" && a.State == attempt.Done {
					winner = "(none)"
				}
				state := string(a.State)
				if a.Discarded {
					state += ", discarded"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, state, strings.Join(names, ","), a.Check, winner,
					a.CreatedAt.Local().Format("01-02 15:04"), oneLine(a.Head(60), 60))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// printAttempt prints the side-by-side comparison of a.
func printAttempt(w io.Writer, a api.Attempt) {
	winner := "no winner yet"
	switch {
	case a.Winner != "":
		winner = "winner " + string(a.Winner)
	case a.State == attempt.Done:
		winner = "no winner: no member passed " + string(a.Check) + " with a change"
	}
	fmt.Fprintf(w, "attempt %d: %s, %s; check %s, base %s\n", a.ID, a.State, winner, a.Check, short(a.Base))
	fmt.Fprintf(w, "task: %s\n\n", oneLine(a.Head(100), 100))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tAGENT\tENGINE/MODEL\tSTATE\tVERDICT\tEXIT\t+/-\tFILES\tTIME\tCOST")
	for _, m := range a.Members {
		rank, exit, verdict, cost, took := "-", "-", "-", "-", "-"
		if m.Rank > 0 {
			rank = strconv.Itoa(m.Rank)
		}
		if m.Verdict != "" {
			verdict = string(m.Verdict)
			if m.ExitCode >= 0 {
				exit = strconv.Itoa(m.ExitCode)
			}
		}
		if m.CostUSD != nil {
			cost = fmt.Sprintf("$%.4f", *m.CostUSD)
		}
		if m.DurationMS > 0 {
			took = (time.Duration(m.DurationMS) * time.Millisecond).Round(10 * time.Millisecond).String()
		}
		engine := string(m.Engine)
		if m.Model != "" {
			engine += "/" + m.Model
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t+%d -%d\t%d\t%s\t%s\n", rank, m.Agent, engine, m.State, verdict, exit,
			m.Change.Added, m.Change.Deleted, m.Change.Files, took, cost)
	}
	tw.Flush()
	for _, m := range a.Members {
		fmt.Fprintln(w)
		head := fmt.Sprintf("── %s", m.Agent)
		if m.Reason != "" {
			head += ": " + m.Reason
		}
		fmt.Fprintln(w, head)
		if m.Error != "" {
			fmt.Fprintf(w, "   (%s)\n", oneLine(m.Error, 200))
		}
		if m.Check != 0 {
			fmt.Fprintf(w, "   check %s, result %d (troupe checks %s); diff: troupe diff %s\n", a.Check, m.Check, m.Agent, m.Agent)
		}
		for _, l := range lastLines(m.Output, outputLines) {
			fmt.Fprintln(w, "   │ "+l)
		}
	}
	if a.Winner != "" {
		fmt.Fprintf(w, "\nmerge the winner: troupe merge %s\n", a.Winner)
		if !a.Discarded && len(a.Members) > 1 {
			fmt.Fprintf(w, "drop the others' work: troupe attempt discard %d --yes\n", a.ID)
		}
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	return lines[max(0, len(lines)-n):]
}
