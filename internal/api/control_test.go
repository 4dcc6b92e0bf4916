package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeRuntime records the person's controls and holds pending permissions.
type fakeRuntime struct {
	conv    inbox.Store // the conversation; nil: none
	mu      sync.Mutex  // guards the fields below
	calls   []string
	perms   map[troupe.PermissionID]troupe.Permission
	decided map[troupe.PermissionID]bool
	busy    bool // WhileIdle: the agent is in a turn
}

func (f *fakeRuntime) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeRuntime) AgentState(troupe.RuntimeKey) (troupe.AgentState, string) {
	return troupe.StateWaiting, "asks to use Bash"
}
func (f *fakeRuntime) Doing(troupe.RuntimeKey) (string, time.Time) {
	return "running: go test ./...", doingSince
}

// doingSince is when the fake runtime's agents began their command.
var doingSince = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func (f *fakeRuntime) Ask(context.Context, troupe.RuntimeKey, troupe.AgentID, string, time.Duration) (troupe.Request, error) {
	return troupe.Request{}, errors.New("not in this test")
}
func (f *fakeRuntime) Await(context.Context, troupe.ProjectID, troupe.RequestID, time.Duration) (troupe.Request, error) {
	return troupe.Request{}, errors.New("not in this test")
}
func (f *fakeRuntime) Delegate(context.Context, troupe.RuntimeKey, troupe.AgentID, string, troupe.CheckName, int) (troupe.Request, error) {
	return troupe.Request{}, errors.New("not in this test")
}
func (f *fakeRuntime) Send(context.Context, troupe.RuntimeKey, troupe.AgentID, troupe.MessageKind, string) (troupe.Message, error) {
	return troupe.Message{}, errors.New("not in this test")
}
func (f *fakeRuntime) Conversation(ctx context.Context, p troupe.ProjectID, q inbox.Page) ([]troupe.Message, error) {
	if f.conv == nil {
		return nil, nil
	}
	return f.conv.Conversation(ctx, p, q)
}
func (f *fakeRuntime) MessageText(ctx context.Context, p troupe.ProjectID, id int64, offset int) (troupe.Message, error) {
	if f.conv == nil {
		return troupe.Message{}, troupe.ErrNotFound
	}
	return f.conv.Text(ctx, p, id, offset)
}
func (f *fakeRuntime) ResumeID(_ context.Context, k troupe.RuntimeKey) (string, error) {
	return "conv-" + string(k.Agent), nil
}
func (f *fakeRuntime) Reset(_ context.Context, k troupe.RuntimeKey) error {
	f.record(fmt.Sprintf("reset %s/%s", k.Project, k.Agent))
	return nil
}
func (f *fakeRuntime) Restart(_ context.Context, k troupe.RuntimeKey) error {
	f.record(fmt.Sprintf("restart %s/%s", k.Project, k.Agent))
	return nil
}
func (f *fakeRuntime) Interrupt(_ context.Context, k troupe.RuntimeKey) error {
	return fmt.Errorf("%s has no turn in flight: %w", k.Agent, troupe.ErrConflict)
}
func (f *fakeRuntime) Permissions(p troupe.ProjectID) []troupe.Permission {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []troupe.Permission{}
	for _, pm := range f.perms {
		if p == "" || pm.Project == p {
			out = append(out, pm)
		}
	}
	return out
}
func (f *fakeRuntime) SyncJournal(context.Context) error { return nil }

func (f *fakeRuntime) WhileIdle(ctx context.Context, k troupe.RuntimeKey, fn func(context.Context) error) error {
	f.record("whileidle " + string(k.Agent))
	f.mu.Lock()
	busy := f.busy
	f.mu.Unlock()
	if busy {
		return fmt.Errorf("%s is in a turn: wait, or troupe interrupt %s: %w", k.Agent, k.Agent, troupe.ErrConflict)
	}
	return fn(ctx)
}

func (f *fakeRuntime) PermissionInput(id troupe.PermissionID, off, limit int) (string, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pm, ok := f.perms[id]
	if !ok {
		return "", 0, fmt.Errorf("no permission request %s waits on you: %w", id, troupe.ErrNotFound)
	}
	off = min(off, len(pm.Input))
	return pm.Input[off:min(off+limit, len(pm.Input))], len(pm.Input), nil
}

func (f *fakeRuntime) Decide(_ context.Context, id troupe.PermissionID, allow bool, reason string) (troupe.Permission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pm, ok := f.perms[id]
	switch {
	case f.decided[id]:
		return troupe.Permission{}, fmt.Errorf("permission %s was already decided: %w", id, troupe.ErrConflict)
	case !ok:
		return troupe.Permission{}, fmt.Errorf("no permission request %s waits on you: %w", id, troupe.ErrNotFound)
	}
	delete(f.perms, id)
	f.decided[id] = true
	pm.State, pm.Reason = troupe.PermAllowed, ""
	if !allow {
		pm.State, pm.Reason = troupe.PermDenied, "the person denied it: "+reason
	}
	return pm, nil
}

var _ api.Runtime = (*fakeRuntime)(nil)

func TestAPIAgentControlAndPermissions(t *testing.T) {
	rt := &fakeRuntime{perms: map[troupe.PermissionID]troupe.Permission{}, decided: map[troupe.PermissionID]bool{}}
	f := newFixtureWith(t, api.Options{Runtime: rt})
	cl := client.New(f.ts.URL, token)
	ctx := t.Context()
	p, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	rt.perms["perm1"] = troupe.Permission{ID: "perm1", Project: p.ID, Agent: "a", Tool: "Bash", State: troupe.PermPending}
	rt.perms["perm2"] = troupe.Permission{ID: "perm2", Project: "pother", Agent: "a", Tool: "Edit", State: troupe.PermPending}

	for _, path := range []string{"/api/permissions", "/api/permissions/perm1/allow"} {
		if got := f.get(t, path, nil).StatusCode; got != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, got)
		}
	}
	as, err := cl.Agents(ctx, p.ID)
	if err != nil || len(as) != 1 || as[0].SessionID != "conv-a" || as[0].State != troupe.StateWaiting {
		t.Fatalf("agents = %+v, %v; want a waiting with its session id", as, err)
	}
	if as[0].Doing != "running: go test ./..." || !as[0].DoingSince.Equal(doingSince) {
		t.Errorf("agent a doing %q since %v, want the runtime's command since %v", as[0].Doing, as[0].DoingSince, doingSince)
	}
	if err := cl.Reset(ctx, p.ID, "a"); err != nil {
		t.Fatal(err)
	}
	if want := "reset " + string(p.ID) + "/a"; len(rt.calls) != 1 || rt.calls[0] != want {
		t.Errorf("runtime calls = %v, want %s", rt.calls, want)
	}
	if code := f.do(t, "POST", "/api/projects/"+string(p.ID)+"/agents/a/restart", "", nil); code != http.StatusNoContent {
		t.Errorf("restart: %d, want 204", code)
	}
	if want := "restart " + string(p.ID) + "/a"; len(rt.calls) != 2 || rt.calls[1] != want {
		t.Errorf("runtime calls = %v, want %s last", rt.calls, want)
	}
	if err := cl.Reset(ctx, "pnope", "a"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("reset in an unknown project = %v, want not found", err)
	}
	err = cl.Interrupt(ctx, p.ID, "a")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || !errors.Is(err, troupe.ErrConflict) ||
		ce.Msg != "a has no turn in flight" { // the tag word left out (troupe.Sentence)
		t.Errorf("interrupt without a turn = %#v, want 409 saying a has no turn in flight", err)
	}

	all, err := cl.Permissions(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("permissions = %+v, %v; want both projects'", all, err)
	}
	mine, err := cl.Permissions(ctx, p.ID)
	if err != nil || len(mine) != 1 || mine[0].ID != "perm1" {
		t.Fatalf("permissions of %s = %+v, %v; want perm1", p.ID, mine, err)
	}
	if _, err := cl.Permissions(ctx, "pnope"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("permissions of an unknown project = %v, want not found", err)
	}
	got, err := cl.Allow(ctx, "perm1")
	if err != nil || got.State != troupe.PermAllowed {
		t.Fatalf("allow = %+v, %v", got, err)
	}
	if _, err := cl.Allow(ctx, "perm1"); !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Errorf("allow twice = %v, want 409", err)
	}
	if _, err := cl.Deny(ctx, "nope", ""); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Errorf("deny unknown = %v, want 404", err)
	}
	got, err = cl.Deny(ctx, "perm2", "use Read")
	if err != nil || got.State != troupe.PermDenied || !strings.HasSuffix(got.Reason, ": use Read") {
		t.Fatalf("deny = %+v, %v; want denied with the reason", got, err)
	}
	// deny without a body: no reason.
	rt.perms["perm3"] = troupe.Permission{ID: "perm3", Project: p.ID, Agent: "a", Tool: "Bash"}
	req, _ := http.NewRequest("POST", f.ts.URL+"/api/permissions/perm3/deny", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("deny without a body: %d, want 200", resp.StatusCode)
	}
}

// TestAPIWithoutRuntimeRefusesControls: a daemon that runs no agents says
// so instead of failing obscurely.
// TestAPIPermissionInputWhole: a request's input of 2.5 pages reads whole
// through the paged route; a bad offset names the fix; an unknown id 404s.
func TestAPIPermissionInputWhole(t *testing.T) {
	rt := &fakeRuntime{perms: map[troupe.PermissionID]troupe.Permission{}, decided: map[troupe.PermissionID]bool{}}
	f := newFixtureWith(t, api.Options{Runtime: rt})
	cl := client.New(f.ts.URL, token)
	whole := strings.Repeat("echo hi; ", api.MaxInputPage*5/2/9) + "rm -rf ~"
	rt.perms["big"] = troupe.Permission{ID: "big", Project: "p", Agent: "a", Tool: "Bash", Input: whole, State: troupe.PermPending}
	got, err := cl.PermissionInput(t.Context(), "big")
	if err != nil || got != whole {
		t.Fatalf("PermissionInput = %d bytes (tail %q), %v; want all %d", len(got), got[max(0, len(got)-10):], err, len(whole))
	}
	if _, err := cl.PermissionInput(t.Context(), "nope"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if a := f.get(t, "/api/permissions/big/input?offset=-1", map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != http.StatusBadRequest || !strings.Contains(a.Body, "offset") {
		t.Errorf("offset -1: %d %s", a.StatusCode, a.Body)
	}
}

func TestAPIWithoutRuntimeRefusesControls(t *testing.T) {
	f := newFixture(t)
	cl := client.New(f.ts.URL, token)
	p, err := cl.AddProject(t.Context(), teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	if err := cl.Reset(t.Context(), p.ID, "a"); !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable {
		t.Errorf("reset = %v, want 503", err)
	}
	if _, err := cl.Permissions(t.Context(), ""); !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable {
		t.Errorf("permissions = %v, want 503", err)
	}
}
