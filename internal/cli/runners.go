package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// runnersCmd is `troupe runners`: every runner with credentials, whether
// it is connected, the agents it runs and its load.
func runnersCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "runners",
		Short: "List the runners (other machines running agents): labels, connected since, agents, load",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			rs, err := cl.Runners(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"runners": rs})
			}
			if len(rs) == 0 {
				fmt.Fprintln(g.out, "no runners: add one with troupe runner add NAME")
				return nil
			}
			names := map[troupe.ProjectID]string{}
			if ps, err := cl.Projects(cmd.Context()); err == nil {
				for _, p := range ps {
					names[p.ID] = p.Name
				}
			}
			return renderRunners(g.out, rs, names, time.Local)
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return c
}

// renderRunners writes the runners' table; names are the projects' names
// by id (an agent of a project not in it is shown with the id), times are
// shown in loc.
func renderRunners(w io.Writer, rs []api.RunnerInfo, names map[troupe.ProjectID]string, loc *time.Location) error {
	at := func(t time.Time) string { return t.In(loc).Format("2006-01-02 15:04:05") }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLABELS\tCONNECTED\tAGENTS\tLOAD")
	for _, r := range rs {
		labels := strings.Join(r.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		conn := "since " + at(r.ConnectedSince)
		switch {
		case !r.Connected && r.LastSeen.IsZero():
			conn = "no, never connected"
		case !r.Connected:
			conn = "no, last seen " + at(r.LastSeen)
		}
		var agents []string
		for _, a := range r.Agents {
			p := names[a.Project]
			if p == "" {
				p = string(a.Project)
			}
			agents = append(agents, fmt.Sprintf("%s/%s (%s)", p, a.Agent, a.State))
		}
		if len(agents) == 0 {
			agents = []string{"-"}
		}
		load := fmt.Sprint(r.Load.Agents)
		if r.Load.MaxAgents > 0 {
			load += fmt.Sprintf("/%d", r.Load.MaxAgents)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, labels, conn, strings.Join(agents, ", "), load)
	}
	return tw.Flush()
}

// runnerAdminCmds are `troupe runner add` and `troupe runner revoke`: the
// person's side of a runner's credentials, attached under `troupe
// runner` (which, run itself, is the runner).
func runnerAdminCmds(g *globals) []*cobra.Command {
	var out string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Mint a runner's credentials and write them to a file (shown once)",
		Long: "Mint the credentials of runner NAME, allowed only its own subjects, and write them to FILE " +
			"(default NAME.creds in the current folder; mode 0600; an existing file is never overwritten). " +
			"Copy the file to the other machine and start the runner there.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !troupe.RunnerName(name).Valid() {
				return fmt.Errorf("bad runner name %q: %s", name, troupe.RunnerNameRule)
			}
			if out == "" {
				out = name + ".creds"
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			// The file first: credentials minted that cannot be written
			// would be lost (the daemon shows them once).
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("-o: %s exists: troupe never overwrites a credentials file; remove it, or name another with -o FILE", out)
			}
			if err != nil {
				return fmt.Errorf("create credentials file: %w", err)
			}
			creds, err := cl.AddRunner(cmd.Context(), name)
			if err != nil {
				f.Close()
				os.Remove(out)
				return err
			}
			_, werr := f.WriteString(creds.Creds)
			if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
				os.Remove(out)
				return fmt.Errorf("write credentials file %s: %w (the credentials are lost: troupe runner revoke %s, then add it again)", out, err, name)
			}
			if g.json { // where they are, never what they are
				return g.printJSON(map[string]any{"runner": name, "file": out})
			}
			fmt.Fprintf(g.out, "wrote the credentials of runner %s to %s (mode 0600); the daemon does not show them again\n", name, out)
			fmt.Fprintf(g.out, "copy %s to the other machine, then run there:\n  troupe runner --creds %s\n", out, out)
			fmt.Fprintln(g.out, "(add --server URL if that machine reaches the bus by another address than the file's url; --labels to say what it offers)")
			return nil
		},
	}
	add.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	add.Flags().StringVarP(&out, "output", "o", "", "file to write the credentials to (default NAME.creds); never overwritten")
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "End a runner's credentials: the daemon drops it and its agents there",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !troupe.RunnerName(name).Valid() {
				return fmt.Errorf("bad runner name %q: %s", name, troupe.RunnerNameRule)
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.RevokeRunner(cmd.Context(), name); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"runner": name, "done": "revoked"})
			}
			fmt.Fprintf(g.out, "revoked the credentials of runner %s: the daemon no longer listens to it, and its agents there are unreachable\n", name)
			return nil
		},
	}
	revoke.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	return []*cobra.Command{add, revoke}
}
