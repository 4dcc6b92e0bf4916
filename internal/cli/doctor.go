package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/daemon"
	"github.com/troupe-dev/troupe/internal/doctor"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/projfile"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
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
			cs := doctor.Run(cmd.Context(), doctor.Options{OpenAI: openaiEndpoints()})
			cs = append(cs, doctor.Sandbox(sandboxInfo()))
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

// openaiEndpoints are the openai agents of the team of the project the CLI
// runs in (the nearest folder up with .troupe/team.toml), for doctor to
// probe their model servers; none when there is no such team or it does
// not parse (the daemon reports a bad team).
func openaiEndpoints() []doctor.Endpoint {
	team := folderTeam()
	if team == nil {
		return nil
	}
	var eps []doctor.Endpoint
	for _, a := range team.Agents {
		if a.Engine != troupe.EngineOpenAI {
			continue
		}
		url, _ := a.Options["base_url"].(string)
		key, _ := a.Options["api_key_env"].(string)
		eps = append(eps, doctor.Endpoint{Agent: string(a.Name), BaseURL: url, KeyEnv: key, KeyInAgentEnv: key != "" && a.Env[key] != ""})
	}
	return eps
}

// folderTeam is the team of the project the CLI runs in (the nearest
// folder up with .troupe/team.toml); nil when there is none or it does not
// parse (the daemon reports a bad team).
func folderTeam() *project.Team {
	dir, err := os.Getwd()
	if err != nil {
		return nil
	}
	for {
		const file = ".troupe/team.toml"
		if fi, err := os.Lstat(filepath.Join(dir, file)); err == nil && fi.Mode().IsRegular() {
			data, _, err := projfile.Team.ReadIn(dir, file)
			if err != nil {
				return nil
			}
			team, err := project.ParseTeam(file, data)
			if err != nil {
				return nil
			}
			return team
		}
		up := filepath.Dir(dir)
		if up == dir {
			return nil
		}
		dir = up
	}
}

// sandboxInfo is the sandbox's mechanism on this machine and the agents of
// the folder's team (the nearest folder up with .troupe/team.toml) that
// run without it.
func sandboxInfo() doctor.SandboxInfo {
	r := sandbox.Detect()
	info := doctor.SandboxInfo{Mechanism: string(r.Mechanism), Covers: r.Covers, Why: r.Why}
	if team := folderTeam(); team != nil {
		for _, a := range team.Agents {
			if !sandbox.Enabled(a) {
				info.Unsandboxed = append(info.Unsandboxed, string(a.Name))
			}
		}
	}
	return info
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
