package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/cgroup"
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
			cs := doctor.Run(cmd.Context(), doctor.Options{OpenAI: openaiEndpoints(cmd.Context(), g)})
			cs = append(cs, doctor.Sandbox(sandboxInfo()))
			var err error
			if g.json {
				err = g.printJSON(map[string]any{"checks": cs})
			} else if err = doctor.Table(g.out, cs); err == nil {
				if dir, derr := g.dir(); derr == nil {
					storeSize(g.out, dir)
				}
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
// not parse (the daemon reports a bad team). The team file is anyone's
// writing: a key is sent only to an endpoint the person approved with it,
// which the daemon tells (approvedEndpoints).
func openaiEndpoints(ctx context.Context, g *globals) []doctor.Endpoint {
	team, dir := folderTeam()
	if team == nil {
		return nil
	}
	var eps []doctor.Endpoint
	var approved map[string]bool
	why := ""
	for _, a := range team.Agents {
		if a.Engine != troupe.EngineOpenAI {
			continue
		}
		url, _ := a.Options["base_url"].(string)
		key, _ := a.Options["api_key_env"].(string)
		ep := doctor.Endpoint{Agent: string(a.Name), BaseURL: url, KeyEnv: key, KeyInAgentEnv: key != "" && a.Env[key] != ""}
		if key != "" && approved == nil && why == "" {
			approved, why = approvedEndpoints(ctx, g, dir)
		}
		if ep.KeyApproved = approved[endpointKey(url, key)]; !ep.KeyApproved && why == "" {
			ep.Withheld = "the approved team of this project has no agent with this base_url and api_key_env (troupe team diff)"
		} else if !ep.KeyApproved {
			ep.Withheld = why
		}
		eps = append(eps, ep)
	}
	return eps
}

// folderTeam is the team of the project the CLI runs in (the nearest
// folder up with .troupe/team.toml) and that folder; nil when there is
// none or it does not parse (the daemon reports a bad team).
func folderTeam() (*project.Team, string) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, ""
	}
	for {
		const file = ".troupe/team.toml"
		if fi, err := os.Lstat(filepath.Join(dir, file)); err == nil && fi.Mode().IsRegular() {
			data, _, err := projfile.Team.ReadIn(dir, file)
			if err != nil {
				return nil, ""
			}
			team, err := project.ParseTeam(file, data)
			if err != nil {
				return nil, ""
			}
			return team, dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return nil, ""
		}
		dir = up
	}
}

// approvedEndpoints asks the daemon for the (base_url, api_key_env) pairs
// of the openai agents of the approved team of the project at dir, or says
// in one line why it cannot tell.
func approvedEndpoints(ctx context.Context, g *globals, dir string) (map[string]bool, string) {
	cl, err := g.client()
	if err != nil {
		return nil, "no daemon answers to say whether the person approved this team (" + err.Error() + ")"
	}
	canon, err := project.Canonical(dir)
	if err != nil {
		return nil, err.Error()
	}
	p, err := cl.ResolveProject(ctx, canon)
	switch {
	case errors.Is(err, troupe.ErrNotFound) || err == nil && p.Path != canon:
		return nil, "this folder is not a registered project: its team file is not approved"
	case err != nil:
		return nil, "the daemon did not say whether the person approved this team (" + err.Error() + ")"
	}
	t, err := cl.Team(ctx, p.ID)
	if err != nil {
		return nil, "the daemon did not say whether the person approved this team (" + err.Error() + ")"
	}
	out := map[string]bool{}
	for _, a := range t.Approved {
		if a.Engine != troupe.EngineOpenAI {
			continue
		}
		url, _ := a.Options["base_url"].(string)
		key, _ := a.Options["api_key_env"].(string)
		out[endpointKey(url, key)] = true
	}
	return out, ""
}

// endpointKey is a (base_url, api_key_env) pair as the openai engine uses
// it (the URL without its trailing slashes).
func endpointKey(url, keyEnv string) string {
	return strings.TrimRight(url, "/") + "\x00" + keyEnv
}

// sandboxInfo is the sandbox's mechanism on this machine and the agents of
// the folder's team (the nearest folder up with .troupe/team.toml) that
// run without it.
func sandboxInfo() doctor.SandboxInfo {
	r := sandbox.Detect()
	info := doctor.SandboxInfo{Mechanism: string(r.Mechanism), Covers: r.Covers, Why: r.Why}
	caps := cgroup.Probe()
	info.Caps, info.CapsWhy = caps.Text(), caps.Why
	if !caps.Memory {
		info.CapsOff = append(info.CapsOff, "memory")
	}
	if !caps.Processes {
		info.CapsOff = append(info.CapsOff, "processes")
	}
	if team, _ := folderTeam(); team != nil {
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
