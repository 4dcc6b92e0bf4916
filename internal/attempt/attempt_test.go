package attempt

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

func cost(f float64) *float64 { return &f }

// TestRank: passed first; within a verdict a change before no change,
// then fewer lines, less time, lower cost (unknown last), the name; the
// winner is the first when it passed and changed something.
func TestRank(t *testing.T) {
	pass := func(name string, lines int, ms int64, c *float64) Member {
		return Member{Agent: troupe.AgentID(name), Verdict: troupe.CheckPassed, ExitCode: 0,
			Change: worktree.Stat{Files: min(lines, 1), Added: lines}, DurationMS: ms, CostUSD: c}
	}
	fail := func(name string, lines int) Member {
		return Member{Agent: troupe.AgentID(name), Verdict: troupe.CheckFailed, ExitCode: 1,
			Change: worktree.Stat{Files: min(lines, 1), Added: lines}, DurationMS: 10}
	}
	for _, tc := range []struct {
		name    string
		in      []Member
		order   string // agents in rank order
		winner  troupe.AgentID
		reasons []string // a part of each member's reason, in rank order
	}{
		{"pass, break, nothing", []Member{fail("nothing", 0), fail("breaks", 3), pass("fixes", 5, 30, nil)},
			"fixes breaks nothing", "fixes",
			[]string{"best: passed test with +5 -0 in 1 file", "after fixes: failed test (exit 1)", "after breaks: changed nothing"}},
		{"an empty passing change ranks after a passing change, before a failing one", []Member{pass("empty", 0, 1, nil), fail("broke", 1), pass("big", 50, 99, nil)},
			"big empty broke", "big", []string{"best", "after big: changed nothing", "after empty: failed test"}},
		{"smaller change, then time, then cost", []Member{pass("slow", 4, 90, cost(0.01)), pass("large", 9, 10, cost(0.01)), pass("fast", 4, 50, cost(0.05)), pass("cheap", 4, 50, cost(0.01)), pass("unknown", 4, 50, nil)},
			"cheap fast unknown slow large", "cheap",
			[]string{"best", "costlier ($0.0500 against $0.0100)", "its cost is unknown", "slower (90ms against 50ms)", "a larger change (9 lines against 4)"}},
		{"nobody passed: no winner", []Member{fail("a", 0), fail("b", 2)}, "b a", "",
			[]string{"no member passed test; first of those that did not: failed test (exit 1), +2 -0 in 1 file", "changed nothing"}},
		{"the only passing member changed nothing: no winner", []Member{pass("a", 0, 1, nil)}, "a", "", []string{"nothing to merge"}},
		{"a check that did not run", []Member{{Agent: "x"}, pass("y", 1, 1, nil)}, "y x", "y", []string{"best", "its check test did not run"}},
		{"a tie: by name", []Member{pass("b", 1, 1, nil), pass("a", 1, 1, nil)}, "a b", "a", []string{"best", "by name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, winner := Rank(tc.in, "test")
			var order []string
			for i, m := range got {
				order = append(order, string(m.Agent))
				if m.Rank != i+1 {
					t.Errorf("%s has rank %d, want %d", m.Agent, m.Rank, i+1)
				}
				if !strings.Contains(m.Reason, tc.reasons[i]) {
					t.Errorf("%s's reason = %q, want it to say %q", m.Agent, m.Reason, tc.reasons[i])
				}
			}
			if strings.Join(order, " ") != tc.order || winner != tc.winner {
				t.Fatalf("order %v winner %q; want %s winner %q", order, winner, tc.order, tc.winner)
			}
		})
	}
}

func TestHead(t *testing.T) {
	a := Attempt{Task: "  fix the parser\nand more lines"}
	if got := a.Head(40); got != "fix the parser" {
		t.Fatalf("Head = %q", got)
	}
	if got := (Attempt{Task: "héllo world"}).Head(2); got != "h…" {
		t.Fatalf("Head cut mid-character = %q", got)
	}
}
