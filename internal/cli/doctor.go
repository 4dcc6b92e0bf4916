package cli

import (
	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/doctor"
)

func doctorCmd(g *globals) *cobra.Command {
	var strict bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check each engine's CLI, version and login on this machine (no daemon needed)",
		Long: "Check each engine troupe drives (claude, codex, opencode, openai, fake): its CLI on PATH and\n" +
			"its version, whether troupe is tested with that version, whether a login or API key is present\n" +
			"(secrets are never shown), and a one-line fix for what is missing. Exits 0 (it is a report)\n" +
			"unless --strict and some engine is not ready.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	return c
}
