package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func diffCmd(g *globals) *cobra.Command {
	var stat bool
	c := &cobra.Command{
		Use:   "diff AGENT",
		Short: "Show an agent's changes in its worktree against its base, uncommitted and new files included",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			d, err := cl.Diff(cmd.Context(), p.ID, troupe.AgentID(args[0]), stat)
			if err != nil {
				return err
			}
			if d == "" {
				fmt.Fprintf(g.out, "%s: no changes\n", args[0])
				return nil
			}
			fmt.Fprint(g.out, d)
			return nil
		},
	}
	c.Flags().BoolVar(&stat, "stat", false, "a summary: files changed and lines added and removed")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func mergeCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "merge AGENT",
		Short: "Commit an agent's work on its branch and merge it into the project's current branch (only when clean and free of conflicts)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.Merge(cmd.Context(), p.ID, troupe.AgentID(args[0]))
			if err != nil {
				return err
			}
			if !res.Merged {
				fmt.Fprintf(g.out, "%s: nothing to merge; %s is already in %s\n", args[0], res.Branch, res.Into)
				return nil
			}
			fmt.Fprintf(g.out, "%s: merged %s into %s (%s)\n", args[0], res.Branch, res.Into, short(res.Commit))
			return nil
		},
	}
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
			fmt.Fprintf(g.out, "%s: worktree %s removed; branch %s kept (delete it with git branch -D %s); the agent's next start makes a new worktree on it\n",
				args[0], res.Path, res.Branch, res.Branch)
			return nil
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove even with uncommitted changes (they are lost)")
	for _, s := range []*cobra.Command{reset, remove} {
		s.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	}
	c.AddCommand(reset, remove)
	return c
}
