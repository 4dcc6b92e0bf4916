// Package checktest holds the contract suite of check.Store: results
// numbered in order, listed newest first by project, agent, turn and
// check (C1: never across projects), the newest MaxResultsPerAgent of each
// agent kept. Every Store implementation runs it (check.MemStore, the
// SQLite store); production code never imports it.
package checktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// RunStore runs the contract against the stores open returns, a new empty
// one per subtest.
func RunStore(t *testing.T, open func(t *testing.T) check.Store) {
	ctx := context.Background()
	res := func(p troupe.ProjectID, a troupe.AgentID, name troupe.CheckName, turn troupe.TurnID, st troupe.CheckState) check.Result {
		return check.Result{Project: p, Agent: a, Check: name, Command: "go test ./...", Dir: "sub", State: st, ExitCode: 1,
			Reason: "why", Turn: turn, StartedAt: time.Unix(1700000000, 7).UTC(), DurationMS: 1234,
			Output: "FAIL\n", OutputBytes: 5000, OutputCut: "cut"}
	}
	t.Run("round trip and order", func(t *testing.T) {
		s := open(t)
		a, err := s.AddCheckResult(ctx, res("p1", "dev", "test", "t1", troupe.CheckFailed))
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.AddCheckResult(ctx, res("p1", "dev", "lint", "t2", troupe.CheckPassed))
		if err != nil {
			t.Fatal(err)
		}
		if a.ID <= 0 || b.ID <= a.ID {
			t.Fatalf("ids %d, %d: want positive and rising", a.ID, b.ID)
		}
		got, err := s.CheckResults(ctx, check.Filter{Project: "p1"})
		if err != nil || len(got) != 2 || got[0] != b || got[1] != a {
			t.Fatalf("CheckResults = %+v, %v\nwant %+v, %+v", got, err, b, a)
		}
	})
	t.Run("filters and projects", func(t *testing.T) {
		s := open(t)
		for _, r := range []check.Result{
			res("p1", "dev", "test", "t1", troupe.CheckFailed),
			res("p1", "dev", "test", "t2", troupe.CheckPassed),
			res("p1", "qa", "test", "t9", troupe.CheckPassed),
			res("p2", "dev", "test", "t1", troupe.CheckPassed),
			res("p1", "dev", "lint", "t2", troupe.CheckTimedOut),
		} {
			if _, err := s.AddCheckResult(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			f    check.Filter
			want int
		}{
			{check.Filter{Project: "p1"}, 4},
			{check.Filter{Project: "p1", Agent: "dev"}, 3},
			{check.Filter{Project: "p1", Agent: "dev", Turn: "t2"}, 2},
			{check.Filter{Project: "p1", Check: "lint"}, 1},
			{check.Filter{Project: "p2"}, 1},
			{check.Filter{Project: "p3"}, 0},
			{check.Filter{Project: "p1", Limit: 2}, 2},
		} {
			got, err := s.CheckResults(ctx, tc.f)
			if err != nil || len(got) != tc.want {
				t.Errorf("CheckResults(%+v) = %d results, %v; want %d", tc.f, len(got), err, tc.want)
			}
			for _, r := range got {
				if r.Project != tc.f.Project {
					t.Errorf("CheckResults(%+v) gave a result of project %s", tc.f, r.Project)
				}
			}
		}
	})
	t.Run("invalid", func(t *testing.T) {
		s := open(t)
		if _, err := s.AddCheckResult(ctx, check.Result{Project: "p1", Agent: "dev", Check: "test"}); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("no state: %v; want ErrInvalid", err)
		}
		if _, err := s.CheckResults(ctx, check.Filter{}); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("no project: %v; want ErrInvalid", err)
		}
	})
	t.Run("bounded per agent", func(t *testing.T) {
		s := open(t)
		other, err := s.AddCheckResult(ctx, res("p1", "qa", "test", "", troupe.CheckPassed))
		if err != nil {
			t.Fatal(err)
		}
		var last check.Result
		for i := range check.MaxResultsPerAgent + 5 {
			if last, err = s.AddCheckResult(ctx, res("p1", "dev", "test", troupe.TurnID(fmt.Sprint(i)), troupe.CheckPassed)); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := s.CheckResults(ctx, check.Filter{Project: "p1", Agent: "dev", Limit: 1000})
		if len(got) != check.MaxResultsPerAgent || got[0] != last || got[len(got)-1].Turn != "5" {
			t.Fatalf("kept %d results (newest %+v, oldest turn %s); want the newest %d", len(got), got[0], got[len(got)-1].Turn, check.MaxResultsPerAgent)
		}
		if got, _ := s.CheckResults(ctx, check.Filter{Project: "p1", Agent: "qa"}); len(got) != 1 || got[0] != other {
			t.Fatalf("another agent's results = %+v; want kept", got)
		}
	})
}
