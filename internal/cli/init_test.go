package cli

import (
	"slices"
	"testing"

	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestInitTeamParses: the team troupe init writes loads for each engine
// it writes, the first agent named lead, the others after their engine.
func TestInitTeamParses(t *testing.T) {
	for _, engines := range [][]troupe.Engine{
		{troupe.EngineFake},
		{troupe.EngineClaude, troupe.EngineCodex, troupe.EngineOpenCode},
		{troupe.EngineOpenCode, troupe.EngineFake},
	} {
		team, err := project.ParseTeam("team.toml", []byte(teamSource(engines)))
		if err != nil {
			t.Fatalf("%v: %v\n%s", engines, err, teamSource(engines))
		}
		var got []troupe.Engine
		for i, a := range team.Agents {
			got = append(got, a.Engine)
			if want := agentName(i, a.Engine); string(a.Name) != want {
				t.Errorf("%v: agent %d is %q, want %q", engines, i, a.Name, want)
			}
		}
		if !slices.Equal(got, engines) || team.Agents[0].Name != "lead" {
			t.Errorf("%v: agents %+v", engines, team.Agents)
		}
	}
}
