package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/projfile"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// profilesResult is troupe profiles' answer (--json).
type profilesResult struct {
	Dir      string         `json:"dir"`
	Profiles []profileUsage `json:"profiles"`
	// Daemon is "running" or "not running": the projects that use a
	// profile are the daemon's registered ones, unknown without it.
	Daemon string `json:"daemon"`
	// Cut: the folder holds more profiles than are listed
	// (project.MaxProfiles, the first by name).
	Cut bool `json:"cut,omitempty"`
}

type profileUsage struct {
	project.Profile
	UsedBy []profileUser `json:"used_by"`
}

type profileUser struct {
	Project troupe.ProjectID `json:"project"`
	Path    string           `json:"path"`
	Agent   troupe.AgentID   `json:"agent"`
}

func profilesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "profiles",
		Short: "List your agent profiles ($XDG_CONFIG_HOME/troupe/profiles) and the projects' agents that use each",
		Long: "An agent profile is NAME.toml in $XDG_CONFIG_HOME/troupe/profiles (default ~/.config/troupe/profiles):\n" +
			"the keys of an [[agent]] table but name (engine, model, permission_mode, allowed_tools, prompt, env,\n" +
			"an [ENGINE] table of its options...). An agent that says profile = \"NAME\" in a team file gets them;\n" +
			"its own keys win. A profile's change reloads every team that uses it; one that widens a grant\n" +
			"waits for troupe team approve, as an edit of the team file does. Works without a daemon (then\n" +
			"without the projects that use each profile).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := listProfiles(cmd.Context(), g)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			return printProfiles(g, res)
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return c
}

func listProfiles(ctx context.Context, g *globals) (profilesResult, error) {
	dir, err := project.ProfileDir(os.Getenv)
	if err != nil {
		return profilesResult{}, err
	}
	ps, cut, err := project.Profiles(dir)
	if err != nil {
		return profilesResult{}, err
	}
	res := profilesResult{Dir: dir, Daemon: "not running", Profiles: []profileUsage{}, Cut: cut}
	for _, p := range ps {
		res.Profiles = append(res.Profiles, profileUsage{Profile: p, UsedBy: []profileUser{}})
	}
	var projects []api.Project
	cl, err := g.client()
	if err == nil {
		projects, err = cl.Projects(ctx)
	}
	switch {
	case errors.Is(err, client.ErrNotRunning):
		return res, nil
	case err != nil:
		return profilesResult{}, err
	}
	res.Daemon = "running"
	for _, p := range projects {
		data, _, err := projfile.Team.ReadIn(p.Path, project.TeamFile)
		if err != nil {
			continue
		}
		for _, ap := range project.TeamProfiles(data) {
			i := slices.IndexFunc(res.Profiles, func(u profileUsage) bool { return u.Name == ap.Profile })
			if i < 0 {
				res.Profiles = append(res.Profiles, profileUsage{
					Profile: project.Profile{Name: ap.Profile, Path: project.ProfileFile(dir, ap.Profile),
						Error: "missing: the agents below name it; create the file, or remove their profile key"},
					UsedBy: []profileUser{}})
				i = len(res.Profiles) - 1
			}
			res.Profiles[i].UsedBy = append(res.Profiles[i].UsedBy, profileUser{Project: p.ID, Path: p.Path, Agent: ap.Agent})
		}
	}
	return res, nil
}

func printProfiles(g *globals, res profilesResult) error {
	if len(res.Profiles) == 0 {
		fmt.Fprintf(g.out, "no profiles in %s: write one as NAME.toml there (the keys of an agent, such as engine = \"claude\" and model = \"sonnet\"), then name it in a team with profile = \"NAME\"\n", res.Dir)
		return nil
	}
	fmt.Fprintf(g.out, "profiles in %s:\n", res.Dir)
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENGINE\tMODEL\tUSED BY\tPROBLEM")
	for _, p := range res.Profiles {
		var users []string
		for _, u := range p.UsedBy {
			users = append(users, fmt.Sprintf("%s (%s)", u.Agent, u.Path))
		}
		used := strings.Join(users, ", ")
		switch {
		case res.Daemon != "running":
			used = "? (no daemon)"
		case used == "":
			used = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, dash(p.Engine), dash(p.Model), used, dash(p.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Cut {
		fmt.Fprintf(g.out, "(the folder holds more than %d profiles: the first %d by name are listed)\n", project.MaxProfiles, project.MaxProfiles)
	}
	if res.Daemon != "running" {
		fmt.Fprintln(g.out, "no troupe daemon is running: the projects that use each profile are its registered ones (start it with troupe serve)")
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
