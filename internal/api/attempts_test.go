package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeAttempts answers the attempt routes: attempt 1 of any project is
// done, won by "a", with "b" and "c" losing; starting one with agent
// "busy" is refused.
type fakeAttempts struct {
	started []attempt.Request
	reset   []error // what each reset of a discard answered
}

func (f *fakeAttempts) Start(_ context.Context, p troupe.ProjectID, r attempt.Request) (attempt.Attempt, error) {
	f.started = append(f.started, r)
	if len(r.Agents) > 0 && r.Agents[0] == "busy" {
		return attempt.Attempt{}, fmt.Errorf("start attempt: busy is in attempt 1, still running: %w", troupe.ErrConflict)
	}
	return attempt.Attempt{ID: 2, Project: p, Task: r.Task, State: attempt.Running}, nil
}

func (f *fakeAttempts) done(p troupe.ProjectID) attempt.Attempt {
	return attempt.Attempt{ID: 1, Project: p, Task: "t", State: attempt.Done, Winner: "a",
		Members: []attempt.Member{{Agent: "a", Rank: 1}, {Agent: "b", Rank: 2}, {Agent: "c", Rank: 3}}}
}

func (f *fakeAttempts) Get(_ context.Context, p troupe.ProjectID, id attempt.ID) (attempt.Attempt, error) {
	if id != 1 {
		return attempt.Attempt{}, fmt.Errorf("read attempt %d: %w", id, troupe.ErrNotFound)
	}
	return f.done(p), nil
}

func (f *fakeAttempts) List(_ context.Context, p troupe.ProjectID, _ int) ([]attempt.Attempt, error) {
	return []attempt.Attempt{f.done(p)}, nil
}

func (f *fakeAttempts) Discard(ctx context.Context, p troupe.ProjectID, id attempt.ID, reset func(context.Context, troupe.RuntimeKey) error) (attempt.Attempt, []troupe.AgentID, error) {
	a := f.done(p)
	for _, ag := range a.Losers() {
		f.reset = append(f.reset, reset(ctx, troupe.RuntimeKey{Project: p, Agent: ag}))
	}
	return a, nil, nil
}

// TestAttemptRoutes: start, list, one, discard through the client; the
// manager's refusals mapped to their status; a discard resets each loser
// through the worktree reset (here: no such agent, so not found).
func TestAttemptRoutes(t *testing.T) {
	fa := &fakeAttempts{}
	f := newFixtureWith(t, api.Options{Attempts: fa, Worktrees: fakeWorktrees{}})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	p, err := cl.AddProject(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := cl.StartAttempt(ctx, p.ID, api.AttemptRequest{Task: "fix it", Agents: []troupe.AgentID{"a", "b"}, Check: "test"})
	if err != nil || a.ID != 2 || len(fa.started) != 1 || fa.started[0].Check != "test" || fa.started[0].Task != "fix it" {
		t.Fatalf("StartAttempt = %+v, %v (started %+v)", a, err, fa.started)
	}
	if _, err := cl.StartAttempt(ctx, p.ID, api.AttemptRequest{Task: "x", Agents: []troupe.AgentID{"busy"}}); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "still running") {
		t.Errorf("a refused start: %v; want 409 with the manager's sentence", err)
	}
	if as, err := cl.Attempts(ctx, p.ID, 0); err != nil || len(as) != 1 || as[0].Winner != "a" {
		t.Errorf("Attempts = %+v, %v", as, err)
	}
	if got, err := cl.Attempt(ctx, p.ID, 1); err != nil || got.ID != 1 {
		t.Errorf("Attempt 1 = %+v, %v", got, err)
	}
	if _, err := cl.Attempt(ctx, p.ID, 9); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Attempt 9: %v; want not found", err)
	}
	if r := f.get(t, "/api/projects/"+string(p.ID)+"/attempts/x", map[string]string{"Authorization": "Bearer " + token}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("attempt x: %d %s; want 400", r.StatusCode, r.Body)
	}
	if _, err := cl.Attempts(ctx, "nope", 0); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("attempts of an unknown project: %v", err)
	}
	if _, err := cl.DiscardAttempt(ctx, p.ID, 1); err != nil || len(fa.reset) != 2 {
		t.Fatalf("DiscardAttempt: %v; resets %v", err, fa.reset)
	}
	for _, err := range fa.reset {
		if !errors.Is(err, troupe.ErrNotFound) {
			t.Errorf("reset of an agent neither in the team nor with a worktree: %v; want not found (nothing to reset)", err)
		}
	}
}

// fakeWorktrees has no worktree: Kept says so; nothing else is called.
type fakeWorktrees struct{ api.Worktrees }

func (fakeWorktrees) Kept(troupe.RuntimeKey) (string, bool) { return "", false }
