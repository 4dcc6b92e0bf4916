package cli

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func permissionsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "permissions [ID]",
		Short: "List the permission requests of agents that wait on you, across projects (decide with `troupe allow` or `troupe deny`); with an ID, show that request's whole input",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return showPermission(cmd.Context(), g, cl, troupe.PermissionID(args[0]))
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
				return g.printJSON(map[string]any{"permissions": ps})
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
			cut := false
			for _, p := range ps {
				name := names[p.Project]
				if name == "" {
					name = string(p.Project)
				}
				in := oneLine(p.Input, 60)
				if in != p.Input {
					in, cut = fmt.Sprintf("%s (%d bytes)", in, p.Size), true
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, name, p.Agent, p.Tool, in,
					time.Since(p.CreatedAt).Round(time.Second))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if cut {
				fmt.Fprintln(g.out, "inputs are cut above: `troupe permissions ID` shows one whole before you decide")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "only this project (path or id; default: every project)")
	return c
}

func allowCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
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
			if g.json {
				return g.printJSON(p)
			}
			fmt.Fprintf(g.out, "allowed %s to use %s\n", p.Agent, p.Tool)
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	return c
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
			if g.json {
				return g.printJSON(p)
			}
			fmt.Fprintf(g.out, "denied %s the use of %s\n", p.Agent, p.Tool)
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.Flags().StringVar(&reason, "reason", "", "what to tell the agent (\"use Read instead\")")
	return c
}

// showPermission prints one pending request with its whole input, read
// page by page: what the person approves is what runs.
func showPermission(ctx context.Context, g *globals, cl *client.Client, id troupe.PermissionID) error {
	ps, err := cl.Permissions(ctx, "")
	if err != nil {
		return err
	}
	i := slices.IndexFunc(ps, func(p troupe.Permission) bool { return p.ID == id })
	if i < 0 {
		return fmt.Errorf("no permission request %s waits on you: see `troupe permissions`", id)
	}
	in, err := cl.PermissionInput(ctx, id)
	if err != nil {
		return err
	}
	p := ps[i]
	p.Input, p.Cut, p.Size = in, false, len(in)
	if g.json {
		return g.printJSON(p)
	}
	fmt.Fprintf(g.out, "%s: %s (%s) asks to use %s\n", p.ID, p.Agent, p.Project, p.Tool)
	if p.Title != "" {
		fmt.Fprintf(g.out, "%s\n", p.Title)
	}
	fmt.Fprintf(g.out, "input, all %d bytes:\n%s\n", len(in), in)
	return nil
}
