package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func permissionsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "permissions",
		Short: "List the permission requests of agents that wait on you, across projects (decide with `troupe allow` or `troupe deny`)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var p troupe.ProjectID
			if g.project != "" { // every project unless asked
				info, err := g.resolveProject(cmd.Context(), cl)
				if err != nil {
					return err
				}
				p = info.ID
			}
			ps, err := cl.Permissions(cmd.Context(), p)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(ps)
			}
			projects, err := cl.Projects(cmd.Context())
			if err != nil {
				return err
			}
			names := map[troupe.ProjectID]string{}
			for _, p := range projects {
				names[p.ID] = p.Name
			}
			if len(ps) == 0 {
				fmt.Fprintln(g.out, "no permission request waits on you")
				return nil
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPROJECT\tAGENT\tTOOL\tINPUT\tAGE")
			for _, p := range ps {
				name := names[p.Project]
				if name == "" {
					name = string(p.Project)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, name, p.Agent, p.Tool, oneLine(p.Input, 60),
					time.Since(p.CreatedAt).Round(time.Second))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "only this project (path or id; default: every project)")
	return c
}

func allowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "allow ID",
		Short: "Allow a pending permission request (see `troupe permissions`)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.Allow(cmd.Context(), troupe.PermissionID(args[0]))
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "allowed %s to use %s\n", p.Agent, p.Tool)
			return nil
		},
	}
}

func denyCmd(g *globals) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "deny ID",
		Short: "Deny a pending permission request (see `troupe permissions`); --reason tells the agent why",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.Deny(cmd.Context(), troupe.PermissionID(args[0]), reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "denied %s the use of %s\n", p.Agent, p.Tool)
			return nil
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "what to tell the agent (\"use Read instead\")")
	return c
}
