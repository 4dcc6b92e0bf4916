package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

func diffCmd(g *globals) *cobra.Command {
	var stat bool
	var turn int64
	c := &cobra.Command{
		Use:   "diff AGENT [--turn N]",
		Short: "Show an agent's changes in its worktree against its base, uncommitted and new files included; tool configuration first, as text. --turn N: what its checkpoint N changed, in any workspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("turn") && turn < 1 {
				return fmt.Errorf("--turn: %d is not a checkpoint's number (1 or more): troupe checkpoints %s lists them", turn, args[0])
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			if turn > 0 {
				return checkpointDiff(cmd.Context(), g, cl, p.ID, troupe.AgentID(args[0]), turn, stat)
			}
			d, err := cl.Diff(cmd.Context(), p.ID, troupe.AgentID(args[0]), stat)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(d)
			}
			if d.Outlook != nil {
				fmt.Fprintln(g.errw, outlookLine(d.Outlook))
			}
			if d.Diff == "" {
				fmt.Fprintf(g.out, "%s: no changes\n", args[0])
				return nil
			}
			if len(d.Config) > 0 {
				fmt.Fprintf(g.errw, "%s changes tool configuration, shown first: %s\n", args[0], strings.Join(d.Config, ", "))
			}
			fmt.Fprint(g.out, d.Diff)
			if d.Cut {
				fmt.Fprintf(g.errw, "this diff is cut at its end (see its last line): review the rest with git; merging it needs --force\n")
			}
			if len(d.Config) > 0 || d.Cut {
				fmt.Fprintf(g.errw, "to merge exactly this work: %s\n", d.MergeCommand)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stat, "stat", false, "a summary: files changed and lines added and removed")
	c.Flags().BoolVar(&g.json, "json", false, "print the diff and where the branch stands as JSON")
	c.Flags().Int64Var(&turn, "turn", 0, "what the agent's checkpoint N changed on disk (its turn's work, whatever wrote it): troupe checkpoints AGENT lists them")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func mergeCmd(g *globals) *cobra.Command {
	var req api.MergeRequest
	c := &cobra.Command{
		Use:   "merge AGENT [--include-config FILE]... [--force]",
		Short: "Commit an agent's work on its branch and merge it into the project's current branch (only when clean, free of conflicts, and changing no tool configuration you did not name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.Merge(cmd.Context(), p.ID, troupe.AgentID(args[0]), req)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			if !res.Merged {
				fmt.Fprintf(g.out, "%s: nothing to merge; %s is already in %s\n", args[0], res.Branch, res.Into)
				return nil
			}
			fmt.Fprintf(g.out, "%s: merged %s into %s (%s)\n", args[0], res.Branch, res.Into, short(res.Commit))
			if len(res.Config) > 0 {
				fmt.Fprintf(g.out, "%s: tool configuration merged, as you named it: %s\n", args[0], strings.Join(res.Config, ", "))
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&req.IncludeConfig, "include-config", nil, "a tool configuration file (.troupe/, .claude/, .gitattributes…) the merge may change, by its path as troupe diff lists it; repeat for each")
	c.Flags().BoolVar(&req.Force, "force", false, "merge even though the agent's diff is cut (too long to show): review the branch with git first")
	c.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.Flags().StringVar(&req.Tree, "expect", "", "merge only if the agent's work is still the one troupe diff showed (the tree it prints)")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func worktreeCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "worktree", Short: "Manage agents' git worktrees (workspace = \"worktree\")"}
	var yes bool
	reset := &cobra.Command{
		Use:   "reset AGENT --yes",
		Short: "Put an agent's worktree and branch back at its base, dropping its work",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return errors.New("this drops the agent's work in its worktree: run again with --yes")
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			if err := cl.ResetWorktree(cmd.Context(), p.ID, troupe.AgentID(args[0])); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"project": p.ID, "agent": args[0], "done": "reset"})
			}
			fmt.Fprintf(g.out, "%s: worktree reset to its base\n", args[0])
			return nil
		},
	}
	reset.Flags().BoolVar(&yes, "yes", false, "drop the agent's work")
	var force bool
	remove := &cobra.Command{
		Use:   "remove AGENT",
		Short: "Delete an agent's worktree folder (its branch stays); refused with uncommitted work unless --force",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.RemoveWorktree(cmd.Context(), p.ID, troupe.AgentID(args[0]), force)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.out, "%s: worktree %s removed; branch %s kept (delete it with git branch -D %s); the agent's next start makes a new worktree on it\n",
				args[0], res.Path, res.Branch, res.Branch)
			return nil
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove even with uncommitted changes (they are lost)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agents' worktrees: path, branch, base, uncommitted changes, commits ahead; and those of agents removed from the team",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.Worktrees(cmd.Context(), p.ID)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			return printWorktrees(g, res)
		},
	}
	for _, s := range []*cobra.Command{reset, remove, list} {
		s.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
		s.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	}
	c.AddCommand(reset, remove, list)
	return c
}

// printWorktrees writes a project's worktrees as a table, then what an
// orphan is.
func printWorktrees(g *globals, res api.WorktreeList) error {
	if len(res.Worktrees) == 0 {
		fmt.Fprintln(g.out, "no worktrees: no agent has workspace = \"worktree\"")
		return nil
	}
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tBRANCH\tFORKED FROM\tCHANGES\tAHEAD\tBEHIND\tPATH")
	orphans := 0
	for _, w := range res.Worktrees {
		changes := "clean"
		switch {
		case !w.Exists:
			changes = "not made yet (at its first start)"
		case w.Dirty:
			changes = "uncommitted: " + plural(w.Changed, "file", "files")
		}
		if w.Error != "" {
			changes += "; error: " + w.Error
		}
		name := string(w.Agent)
		if w.Orphan {
			name += " (removed from the team)"
			orphans++
		}
		base := w.Base
		if w.ForkPoint != "" {
			base += " at " + short(w.ForkPoint)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", name, w.Branch, base, changes, w.Ahead, w.Behind, w.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Cut > 0 {
		fmt.Fprintf(g.out, "%d more worktree folders not shown\n", res.Cut)
	}
	if orphans > 0 {
		fmt.Fprintln(g.out, "worktrees of agents removed from the team are kept with their branches: troupe diff, merge and worktree remove still work on them")
	}
	return nil
}

// printRemovedWorktrees says what removing a project did with its agents'
// worktrees.
func printRemovedWorktrees(g *globals, res api.RemoveProjectResponse) {
	for _, w := range res.Worktrees {
		if w.Removed {
			fmt.Fprintf(g.out, "%s: worktree %s removed; branch %s kept\n", w.Agent, w.Path, w.Branch)
			continue
		}
		fmt.Fprintf(g.errw, "%s: worktree %s KEPT: %s; branch %s kept\n", w.Agent, w.Path, w.Reason, w.Branch)
	}
	if res.Cut > 0 {
		fmt.Fprintf(g.errw, "%d more worktree folders were not looked at and are kept\n", res.Cut)
	}
}

// outlookLine says on one line what a diff is against and what a merge
// would do now.
func outlookLine(o *worktree.Outlook) string {
	s := fmt.Sprintf("against %s, where it forked from %s; %d commit(s) ahead, %d behind", short(o.ForkPoint), o.Base, o.Ahead, o.Behind)
	if o.Behind > 0 {
		s += fmt.Sprintf(" (%s moved since: now %s)", o.Base, short(o.BaseCommit))
	}
	switch {
	case o.Unknown != "":
		s += "; a merge cannot be foreseen: " + o.Unknown
	case o.Merged:
		s += fmt.Sprintf("; %s has this work already", o.Into)
	case len(o.Conflicts) > 0:
		s += fmt.Sprintf("; merging into %s would conflict in %s", o.Into, strings.Join(o.Conflicts, ", "))
	default:
		s += fmt.Sprintf("; merging into %s brings %s", o.Into, plural(o.BringsCount, "file", "files"))
	}
	return s
}
