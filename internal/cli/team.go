package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// teamCmd is `troupe team`: the person's decisions on team changes that
// widen what agents may do (C17).
func teamCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "team", Short: "Review, approve or reject a team change that widens what agents may do"}
	diff := &cobra.Command{
		Use:   "diff",
		Short: "Show what the held change of the team file grants, per agent and field (old → new)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			t, err := cl.Team(cmd.Context(), p.ID)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(t)
			}
			if t.Pending == nil {
				fmt.Fprintf(g.out, "project %s: no team change waits; the team in force is the approved one\n", p.ID)
				return nil
			}
			printPending(g.out, *t.Pending)
			return nil
		},
	}
	diff.Flags().BoolVar(&g.json, "json", false, "print JSON (the approved team and the change waiting)")
	c.AddCommand(diff, decideTeamCmd(g, true), decideTeamCmd(g, false))
	c.PersistentFlags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func decideTeamCmd(g *globals, approve bool) *cobra.Command {
	var digest string
	use, short := "reject", "Keep the approved team in force; the team file stays as it is, held, and asks again once it changes"
	if approve {
		use, short = "approve", "Put the held change of the team file in force (it is shown first)"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			t, err := cl.Team(cmd.Context(), p.ID)
			if err != nil {
				return err
			}
			if t.Pending == nil {
				return fmt.Errorf("%s team of %s: no team change waits (troupe team diff shows the team in force)", use, p.ID)
			}
			if digest == "" {
				digest = t.Pending.Digest
				if !g.json {
					printPending(g.out, *t.Pending) // what is decided is what is shown
				}
			}
			if err := cl.DecideTeam(cmd.Context(), p.ID, digest, approve); err != nil {
				if errors.Is(err, troupe.ErrConflict) {
					return fmt.Errorf("%s team of %s: nothing decided: %w", use, p.ID, err)
				}
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"project": p.ID, "digest": digest, "approved": approve, "change": t.Pending})
			}
			verb := "rejected: the approved team stays in force"
			if approve {
				verb = "approved: the team file is in force"
			}
			fmt.Fprintf(g.out, "team change %s of project %s %s\n", short12(digest), p.ID, verb)
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.Flags().StringVar(&digest, "digest", "", "decide on this change only (its digest, from troupe team diff); refused if the file changed since")
	return c
}

// printPending writes a held change as the person reads it.
func printPending(w io.Writer, p api.PendingTeam) {
	state := "waits for your approval"
	if p.Rejected {
		state = "was rejected; it stays held until the team file changes"
	}
	fmt.Fprintf(w, "project %s: team change %s %s\n", p.Project, short12(p.Digest), state)
	for _, a := range p.Agents {
		if a.New {
			fmt.Fprintf(w, "agent %s (new agent)\n", a.Agent)
		} else {
			fmt.Fprintf(w, "agent %s (keeps its approved definition meanwhile)\n", a.Agent)
		}
		printGrants(w, a.Grants)
	}
	for _, c := range p.Checks {
		if c.New {
			fmt.Fprintf(w, "check %s (new check: it runs a command)\n", c.Check)
		} else {
			fmt.Fprintf(w, "check %s (keeps its approved definition meanwhile)\n", c.Check)
		}
		printGrants(w, c.Grants)
	}
}

// printGrants writes one line per grant: "  field: old → new", or
// "  field: new" when there is no old value.
func printGrants(w io.Writer, gs []api.Grant) {
	for _, g := range gs {
		switch {
		case g.Old == "" && g.New == "":
		case g.Old == "":
			fmt.Fprintf(w, "  %s: %s\n", g.Field, g.New)
		case g.New == "":
			fmt.Fprintf(w, "  %s: %s → (removed)\n", g.Field, g.Old)
		default:
			fmt.Fprintf(w, "  %s: %s → %s\n", g.Field, g.Old, g.New)
		}
	}
}

func short12(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
