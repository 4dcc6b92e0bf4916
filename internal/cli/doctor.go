package cli

import (
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/daemon"
	"github.com/troupe-dev/troupe/internal/doctor"
)

func doctorCmd(g *globals) *cobra.Command {
	var strict, repair bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check each engine's CLI, version and login on this machine (no daemon needed); --repair a damaged database",
		Long: "Check each engine troupe drives (claude, codex, opencode, openai, fake): its CLI on PATH and\n" +
			"its version, whether troupe is tested with that version, whether a login or API key is present\n" +
			"(secrets are never shown), and a one-line fix for what is missing; and git, which agents with\n" +
			"workspace = \"worktree\" need at 2.38 or newer. Exits 0 (it is a report)\n" +
			"unless --strict and some engine is not ready.\n\n" +
			"With --repair: export what is readable of the state dir's damaged database into a fresh one.\n" +
			"The daemon must be stopped. The damaged file is moved aside (troupe.db.damaged-<time>), never\n" +
			"deleted; each table is copied row by row, skipping what cannot be read, and the rows kept and\n" +
			"lost are reported per table.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repair {
				return repairStore(cmd, g)
			}
			cs := doctor.Run(cmd.Context(), doctor.Options{})
			var err error
			if g.json {
				err = g.printJSON(cs)
			} else {
				err = doctor.Table(g.out, cs)
			}
			if err != nil {
				return err
			}
			if strict {
				return doctor.Strict(cs)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print the report as JSON")
	c.Flags().BoolVar(&strict, "strict", false, "exit 1 when an engine is not ready")
	c.Flags().BoolVar(&repair, "repair", false, "export what is readable of a damaged database into a fresh one (daemon stopped)")
	return c
}

// repairStore runs daemon.Repair on the state dir and prints its report.
func repairStore(cmd *cobra.Command, g *globals) error {
	dir, err := g.dir()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(g.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := daemon.Repair(cmd.Context(), dir, log)
	if err != nil {
		if rep != nil && rep.Damaged != "" {
			return fmt.Errorf("%w (the damaged file is kept at %s)", err, rep.Damaged)
		}
		return err
	}
	if g.json {
		return g.printJSON(rep)
	}
	fmt.Fprintf(g.out, "damaged database moved to %s\nfresh database at %s (from schema version %d):\n", rep.Damaged, rep.Path, rep.Version)
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tKEPT\tLOST\tORPHANS\tUNREADABLE SPANS")
	for _, t := range rep.Tables {
		lost := fmt.Sprint(t.Lost)
		if t.RestLost {
			lost += " + the rest"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", t.Table, t.Kept, lost, t.Orphans, t.Unreadable)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.out, "start the daemon again with troupe serve; keep the damaged file until you are sure nothing else is needed from it")
	return err
}
