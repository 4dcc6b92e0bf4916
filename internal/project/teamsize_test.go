package project

import (
	"fmt"
	"strings"
	"testing"
)

// TestATeamHasAtMostMaxAgents: MaxAgents load; one more is refused, the
// error naming the file, the count and the limit.
func TestATeamHasAtMostMaxAgents(t *testing.T) {
	team := func(n int) []byte {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[agent]]\nname = \"a%d\"\nengine = \"fake\"\n\n", i)
		}
		return []byte(b.String())
	}
	if tm, err := ParseTeam("team.toml", team(MaxAgents)); err != nil || len(tm.Agents) != MaxAgents {
		t.Fatalf("a team of %d: %v", MaxAgents, err)
	}
	_, err := ParseTeam("team.toml", team(10_000))
	if err == nil || !strings.HasPrefix(err.Error(), "team.toml:") || !strings.Contains(err.Error(), "10000 agents") ||
		!strings.Contains(err.Error(), fmt.Sprint("at most ", MaxAgents)) {
		t.Errorf("a team of 10,000: %v, want an error naming team.toml, 10000 agents and the limit %d", err, MaxAgents)
	}
}
