// Package attempttest holds the contract suite of attempt.Store: attempts
// numbered in order, read back whole, listed newest first by project (C1:
// never across projects), the running ones of every project found, the
// newest KeepPerProject of each project kept. Every Store implementation
// runs it (attempt.MemStore, the SQLite store); production code never
// imports it.
package attempttest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// RunStore runs the contract against the stores open returns, a new empty
// one per subtest.
func RunStore(t *testing.T, open func(t *testing.T) attempt.Store) {
	ctx := context.Background()
	at := time.Unix(1700000000, 7).UTC()
	one := func(p troupe.ProjectID, task string) attempt.Attempt {
		c := 0.25
		return attempt.Attempt{Project: p, Task: task, Check: "test", Base: "c0ffee", State: attempt.Running, CreatedAt: at,
			Members: []attempt.Member{
				{Agent: "a", Engine: "fake", Model: "m", State: attempt.Finished, Request: "r1", RequestState: troupe.ReqAnswered,
					Check: 7, Verdict: troupe.CheckPassed, ExitCode: 0, Output: "ok\n", Change: worktree.Stat{Files: 1, Added: 2, Deleted: 3},
					DelegatedAt: at, EndedAt: at.Add(time.Second), DurationMS: 1000, CostUSD: &c},
				{Agent: "b", Engine: "fake", State: attempt.Working, Request: "r2", ExitCode: -1, DelegatedAt: at},
			}}
	}
	t.Run("round trip", func(t *testing.T) {
		s := open(t)
		a, err := s.AddAttempt(ctx, one("p1", "fix it"))
		if err != nil || a.ID <= 0 {
			t.Fatalf("AddAttempt = %+v, %v", a, err)
		}
		got, err := s.Attempt(ctx, "p1", a.ID)
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("Attempt = %+v, %v; want %+v", got, err, a)
		}
		a.State, a.Winner, a.Members[1].State = attempt.Done, "a", attempt.Finished
		if err := s.SaveAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Attempt(ctx, "p1", a.ID); !reflect.DeepEqual(got, a) {
			t.Fatalf("after SaveAttempt: %+v; want %+v", got, a)
		}
		if _, err := s.Attempt(ctx, "p2", a.ID); !errors.Is(err, troupe.ErrNotFound) {
			t.Fatalf("attempt of p1 read as p2's: %v", err)
		}
		b := a
		b.Project = "p2"
		if err := s.SaveAttempt(ctx, b); !errors.Is(err, troupe.ErrNotFound) {
			t.Fatalf("SaveAttempt as another project's: %v", err)
		}
		if _, err := s.AddAttempt(ctx, attempt.Attempt{Project: "p1"}); !errors.Is(err, troupe.ErrInvalid) {
			t.Fatalf("AddAttempt of nothing: %v", err)
		}
	})
	t.Run("lists, running ones, retention", func(t *testing.T) {
		s := open(t)
		var last attempt.ID
		for i := range attempt.KeepPerProject + 2 {
			a, err := s.AddAttempt(ctx, one("p1", "task"))
			if err != nil || a.ID <= last {
				t.Fatalf("AddAttempt %d = %d, %v; want an id above %d", i, a.ID, err, last)
			}
			last = a.ID
			if i < 2 {
				continue
			}
			a.State = attempt.Done
			if err := s.SaveAttempt(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		other, _ := s.AddAttempt(ctx, one("p2", "other"))
		list, err := s.Attempts(ctx, "p1", 0)
		if err != nil || len(list) != attempt.KeepPerProject || list[0].ID != last {
			t.Fatalf("Attempts = %d, %v; want the newest %d, newest first", len(list), err, attempt.KeepPerProject)
		}
		if list, _ := s.Attempts(ctx, "p1", 3); len(list) != 3 {
			t.Fatalf("Attempts limited to 3 = %d", len(list))
		}
		run, err := s.RunningAttempts(ctx)
		if err != nil || len(run) != 1 || run[0].ID != other.ID {
			t.Fatalf("RunningAttempts = %+v, %v; want p2's only (p1's first two were cut)", run, err)
		}
	})
}
