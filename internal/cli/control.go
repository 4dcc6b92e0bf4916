package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// agentControlCmd is a command that acts on one agent of the project and
// prints done on success.
func agentControlCmd(g *globals, use, short string, act func(cl *client.Client, ctx context.Context, p troupe.ProjectID, agent troupe.AgentID) error, done string) *cobra.Command {
	c := &cobra.Command{
		Use:   use + " AGENT",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			if err := act(cl, cmd.Context(), p.ID, troupe.AgentID(args[0])); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"project": p.ID, "agent": args[0], "done": use})
			}
			fmt.Fprintf(g.out, done+"\n", args[0])
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func resetCmd(g *globals) *cobra.Command {
	return agentControlCmd(g, "reset", "Give an agent a new conversation: its session is closed now (a turn in flight fails) and the next one starts fresh",
		(*client.Client).Reset, "%s: conversation reset; its next message starts a new one")
}

func interruptCmd(g *globals) *cobra.Command {
	return agentControlCmd(g, "interrupt", "Stop an agent's turn in flight (the turn ends with the error \"interrupted\")",
		(*client.Client).Interrupt, "%s: interrupted; its turn ends now")
}
