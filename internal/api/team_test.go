package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestTeamRoutesApproveByDigest: adding a project answers the grants it
// approves; a widening edit shows as pending (old → new) in the project's
// route and across projects; a decision takes the digest seen (another
// one: 409, nothing held: 404); the routes want the API token.
func TestTeamRoutesApproveByDigest(t *testing.T) {
	f, cl, ctx, dir, file := teamFixture(t)
	os.WriteFile(file, []byte("[[agent]]\nname = \"lead\"\nengine = \"fake\"\nallowed_tools = [\"Read\"]\n"), 0o644)
	p, err := cl.AddProject(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Grants) != 1 || p.Grants[0].Agent != "lead" || !strings.Contains(grantText(p.Grants[0].Grants), `allowed_tools=["Read"]`) {
		t.Fatalf("grants of the added team = %+v", p.Grants)
	}
	if err := cl.DecideTeam(ctx, p.ID, "whatever", true); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("approve with nothing held: %v; want not found", err)
	}

	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, []byte("[[agent]]\nname = \"lead\"\nengine = \"fake\"\nallowed_tools = [\"Read\", \"Bash\"]\n"), 0o644)
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		var c troupe.TeamChange
		if ev.Type == events.TypeTeamChanged && json.Unmarshal(ev.Data, &c) == nil && len(c.Held) > 0 {
			return errStopTeam
		}
		return nil
	})
	if !errors.Is(err, errStopTeam) {
		t.Fatalf("waiting for the held change: %v", err)
	}
	tm, err := cl.Team(ctx, p.ID)
	if err != nil || tm.Pending == nil {
		t.Fatalf("team = %+v, %v; want a pending change", tm, err)
	}
	if got := grantText(tm.Pending.Agents[0].Grants); got != `allowed_tools=["Read"]→["Read", "Bash"]` {
		t.Fatalf("pending grants = %s", got)
	}
	if got := grantText(tm.Approved[0].Grants); !strings.Contains(got, `allowed_tools=["Read"]`) || strings.Contains(got, "Bash") {
		t.Fatalf("approved grants = %s; want the team added", got)
	}
	all, err := cl.TeamChanges(ctx)
	if err != nil || len(all) != 1 || all[0].Digest != tm.Pending.Digest {
		t.Fatalf("team-changes = %+v, %v", all, err)
	}
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer an-mcp-token"}} {
		if a := f.get(t, "/api/projects/"+string(p.ID)+"/team/pending", hdr); a.StatusCode != 401 {
			t.Errorf("pending with %v: %d; want 401", hdr, a.StatusCode)
		}
	}
	if err := cl.DecideTeam(ctx, p.ID, strings.Repeat("0", 64), true); !errors.Is(err, troupe.ErrConflict) {
		t.Fatalf("approve of another digest: %v; want conflict", err)
	}
	if err := cl.DecideTeam(ctx, p.ID, tm.Pending.Digest, true); err != nil {
		t.Fatal(err)
	}
	if tm, _ := cl.Team(ctx, p.ID); tm.Pending != nil || !strings.Contains(grantText(tm.Approved[0].Grants), "Bash") {
		t.Fatalf("after approval: %+v", tm)
	}
}

var errStopTeam = errors.New("stop")

// grantText writes grants as field=old→new, space-separated.
func grantText(gs []api.Grant) string {
	var b []string
	for _, g := range gs {
		s := g.Field + "=" + g.New
		if g.Old != "" {
			s = g.Field + "=" + g.Old + "→" + g.New
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

// teamFixture is a fixture whose registry runs (it reloads team files)
// until the test ends, its client, a context of 20 s, and a project
// folder with its team file's path (the file not written yet).
func teamFixture(t *testing.T) (f *fixture, cl *client.Client, ctx context.Context, dir, file string) {
	t.Helper()
	f = newFixture(t)
	cl = client.New(f.ts.URL, token)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- f.reg.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	dir = t.TempDir()
	file = filepath.Join(dir, ".troupe", "team.toml")
	os.MkdirAll(filepath.Dir(file), 0o755)
	return f, cl, ctx, dir, file
}
