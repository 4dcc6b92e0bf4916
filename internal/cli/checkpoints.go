package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func checkpointsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "checkpoints AGENT",
		Short: "List an agent's checkpoints of its files, oldest first: one at the end of each turn, one before each rewind, reset or removal (troupe diff AGENT --turn N, troupe rewind AGENT N)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.Checkpoints(cmd.Context(), p.ID, troupe.AgentID(args[0]))
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			if res.Unavailable != "" {
				fmt.Fprintf(g.out, "%s: %s\n", args[0], res.Unavailable)
				return nil
			}
			if len(res.Checkpoints) == 0 {
				fmt.Fprintf(g.out, "%s: no checkpoints yet (one is made at the end of each turn)\n", args[0])
				return nil
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CHECKPOINT\tTIME\tREASON\tFILES\t+/−\tSKIPPED")
			for _, cp := range res.Checkpoints {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t+%d −%d\t%s\n", cp.Seq, cp.At.Local().Format("2006-01-02 15:04:05"),
					safeText(checkpointReason(cp)), cp.Files, cp.Added, cp.Deleted, safeText(skipped(cp)))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// checkpointReason is what made cp: its turn, or what was about to happen.
func checkpointReason(cp api.Checkpoint) string {
	if cp.Reason == "turn" && cp.Turn != "" {
		return "turn " + string(cp.Turn)
	}
	return cp.Reason
}

// skipped says which files cp left out (too big), "-" when none.
func skipped(cp api.Checkpoint) string {
	if cp.Skipped == 0 {
		return "-"
	}
	s := strconv.Itoa(cp.Skipped)
	if len(cp.SkippedNames) > 0 {
		s += " (" + strings.Join(cp.SkippedNames, ", ")
		if cp.Skipped > len(cp.SkippedNames) {
			s += ", …"
		}
		s += ")"
	}
	return s
}

// checkpointDiff prints what agent's checkpoint seq changed (troupe diff
// --turn).
func checkpointDiff(ctx context.Context, g *globals, cl *client.Client, p troupe.ProjectID, agent troupe.AgentID, seq int64, stat bool) error {
	d, err := cl.CheckpointDiff(ctx, p, agent, seq, stat)
	if err != nil {
		return err
	}
	if d.Diff == "" {
		fmt.Fprintf(g.out, "%s: checkpoint %d changed no files\n", agent, seq)
		return nil
	}
	fmt.Fprint(g.out, d.Diff)
	if d.Cut {
		fmt.Fprintf(g.errw, "this diff is cut at its end (see its last line): the checkpoint holds all of it (git show %s)\n", d.Tree)
	}
	return nil
}

func rewindCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "rewind AGENT N",
		Short: "Put an agent's files back as they were at its checkpoint N, after a checkpoint of the present (so the rewind can be undone); refused while the agent is in a turn",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || seq < 1 {
				return fmt.Errorf("checkpoint %q: not a checkpoint's number (1 or more): troupe checkpoints %s lists them", args[1], args[0])
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.Rewind(cmd.Context(), p.ID, troupe.AgentID(args[0]), seq)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.out, "%s: files put back as they were at checkpoint %d; checkpoint %d holds them as they were just before (%d files changed since the last checkpoint)\n",
				args[0], res.Seq, res.Before.Seq, res.Before.Files)
			fmt.Fprintf(g.out, "to undo: troupe rewind %s %d\n", args[0], res.Before.Seq)
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}
