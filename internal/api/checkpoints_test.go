package api_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// managerCheckpoints is api.Checkpoints over a worktree.Manager (the
// daemon's is the same, with its retention).
type managerCheckpoints struct{ m *worktree.Manager }

func (c managerCheckpoints) List(ctx context.Context, k troupe.RuntimeKey, work string) ([]worktree.Checkpoint, error) {
	return c.m.Checkpoints(ctx, k, work)
}

func (c managerCheckpoints) Diff(ctx context.Context, k troupe.RuntimeKey, work string, seq int64, stat bool) (worktree.DiffResult, error) {
	return c.m.CheckpointDiff(ctx, k, work, seq, stat)
}

func (c managerCheckpoints) Rewind(ctx context.Context, k troupe.RuntimeKey, work string, seq int64) (worktree.Checkpoint, error) {
	return c.m.Rewind(ctx, k, work, seq, worktree.DefaultRetention)
}

func (c managerCheckpoints) Save(ctx context.Context, k troupe.RuntimeKey, work, reason string) (worktree.Checkpoint, error) {
	return c.m.Checkpoint(ctx, k, work, reason, "", "", worktree.DefaultRetention)
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (c managerCheckpoints) Available(ctx context.Context, dir string) error {
	return worktree.InRepository(ctx, dir)
}

// TestAPICheckpoints: an agent's checkpoints are listed, diffed and
// rewound to through the person's routes (the token needed); a rewind is
// refused while the agent is in a turn and runs through WhileIdle; the
// agent's reset makes a checkpoint first; a project folder that is not a
// git repository has none, said on the list and on troupe agents.
func TestAPICheckpoints(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	rt := &fakeRuntime{}
	trees := worktree.New(t.TempDir())
	f := newFixtureWith(t, api.Options{Runtime: rt, Worktrees: trees, Checkpoints: managerCheckpoints{trees}})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()

	plain, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.Checkpoints(ctx, plain.ID, "a")
	if err != nil || len(res.Checkpoints) != 0 || res.Unavailable != worktree.ErrNoCheckpoints.Error() || !strings.Contains(f.get(t, "/api/projects/"+string(plain.ID)+"/agents/a/checkpoints", map[string]string{"Authorization": "Bearer " + token}).Body, `"checkpoints":[]`) {
		t.Fatalf("checkpoints outside a repository = %+v, %v; want none, unavailable: %s", res, err, worktree.ErrNoCheckpoints)
	}
	if as, err := cl.Agents(ctx, plain.ID); err != nil || as[0].Checkpoints != "none: "+worktree.ErrNoCheckpoints.Error() {
		t.Fatalf("agents of a project outside a repository = %+v, %v; want checkpoints: none", as, err)
	}

	dir := teamDir(t)
	gitIn(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("v1\n"), 0o644)
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-qm", "one")
	p, err := cl.AddProject(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if as, err := cl.Agents(ctx, p.ID); err != nil || as[0].Checkpoints != "" {
		t.Fatalf("agents of a repository = %+v, %v; want checkpoints", as, err)
	}
	k := troupe.RuntimeKey{Project: p.ID, Agent: "a"}
	// A turn's end, as the runtime makes it.
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("v2\n"), 0o644)
	if _, err := trees.Checkpoint(ctx, k, dir, "turn", "t1", "", worktree.DefaultRetention); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("v3\n"), 0o644)
	// The person's reset: a checkpoint first.
	if err := cl.Reset(ctx, p.ID, "a"); err != nil {
		t.Fatal(err)
	}
	res, err = cl.Checkpoints(ctx, p.ID, "a")
	if err != nil || len(res.Checkpoints) != 2 || res.Checkpoints[0].Turn != "t1" || res.Checkpoints[1].Reason != "reset" || res.Unavailable != "" {
		t.Fatalf("checkpoints = %+v, %v; want the turn's and the reset's", res, err)
	}
	d, err := cl.CheckpointDiff(ctx, p.ID, "a", 2, false)
	if err != nil || !strings.Contains(d.Diff, "-v2\n+v3") {
		t.Fatalf("diff of checkpoint 2 = %+v, %v; want v2 → v3", d, err)
	}
	if _, err := cl.CheckpointDiff(ctx, p.ID, "a", 9, false); !errors.Is(err, troupe.ErrNotFound) || !strings.Contains(err.Error(), "troupe checkpoints a lists them") {
		t.Fatalf("diff of an unknown checkpoint = %v, want not found naming troupe checkpoints", err)
	}
	if a := f.get(t, "/api/projects/"+string(p.ID)+"/agents/a/checkpoints/x/diff", map[string]string{"Authorization": "Bearer " + token}); a.StatusCode != 400 {
		t.Fatalf("diff of checkpoint x = %d %s, want 400", a.StatusCode, a.Body)
	}
	for _, path := range []string{"/checkpoints", "/checkpoints/1/diff"} {
		if a := f.get(t, "/api/projects/"+string(p.ID)+"/agents/a"+path, nil); a.StatusCode != 401 {
			t.Errorf("GET %s without the token = %d, want 401", path, a.StatusCode)
		}
	}

	// Only the person's token reaches the rewind (an agent's MCP token
	// is no API token): nothing changed.
	for _, hdr := range []string{"", "Bearer mcp-session-token"} {
		req, _ := http.NewRequest("POST", f.ts.URL+"/api/projects/"+string(p.ID)+"/agents/a/rewind", strings.NewReader(`{"seq":1}`))
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("rewind with %q = %d, want 401", hdr, resp.StatusCode)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "v3\n" {
		t.Fatalf("f.txt after unauthorized rewinds = %q", b)
	}

	// In a turn: refused, nothing changed.
	rt.mu.Lock()
	rt.busy = true
	rt.mu.Unlock()
	if _, err := cl.Rewind(ctx, p.ID, "a", 1); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "troupe interrupt a") {
		t.Fatalf("rewind in a turn = %v, want a conflict naming troupe interrupt", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "v3\n" {
		t.Fatalf("f.txt after a refused rewind = %q", b)
	}
	rt.mu.Lock()
	rt.busy = false
	rt.mu.Unlock()
	rw, err := cl.Rewind(ctx, p.ID, "a", 1)
	if err != nil || rw.Seq != 1 || rw.Before.Seq != 3 {
		t.Fatalf("rewind = %+v, %v; want to 1 after checkpoint 3", rw, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "v2\n" {
		t.Fatalf("f.txt after the rewind = %q, want v2", b)
	}
	if _, err := cl.Rewind(ctx, p.ID, "a", 0); !errors.Is(err, troupe.ErrInvalid) {
		t.Fatalf("rewind to 0 = %v, want invalid", err)
	}
	if _, err := cl.Rewind(ctx, p.ID, "ghost", 1); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("rewind of an unknown agent = %v, want not found", err)
	}
	if a := f.post(t, "/api/projects/"+string(p.ID)+"/agents/a/rewind", `{"seq":1,"x":2}`); a.StatusCode != 400 {
		t.Fatalf("rewind with an unknown field = %d", a.StatusCode)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for _, c := range rt.calls {
		if c == "whileidle a" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("WhileIdle calls = %d (%v), want one per rewind asked", n, rt.calls)
	}
}

// TestAPIWorktreeOpsCheckpointFirst: worktree reset and remove each keep
// the worktree's work in a checkpoint first (listed after the worktree is
// gone, from the project's repository), and are refused, the worktree
// untouched, when that checkpoint cannot be made.
func TestAPIWorktreeOpsCheckpointFirst(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	trees := worktree.New(t.TempDir())
	cps := &failingCheckpoints{managerCheckpoints: managerCheckpoints{trees}}
	f := newFixtureWith(t, api.Options{Runtime: &fakeRuntime{}, Worktrees: trees, Checkpoints: cps})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"w\"\nengine = \"fake\"\nworkspace = \"worktree\"\n"), 0o644)
	gitIn(t, dir, "init", "-q")
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-qm", "one")
	p, err := cl.AddProject(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	k := troupe.RuntimeKey{Project: p.ID, Agent: "w"}
	spec, _, _ := f.reg.Agent(k)
	wt, err := trees.Dir(ctx, k, spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wt, "work.txt"), []byte("one\n"), 0o644)

	cps.fail = errors.New("disk full")
	if err := cl.ResetWorktree(ctx, p.ID, "w"); err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "not reset") {
		t.Fatalf("reset with a failing checkpoint = %v, want refused naming the error", err)
	}
	if _, err := cl.RemoveWorktree(ctx, p.ID, "w", true); err == nil || !strings.Contains(err.Error(), "not removed") {
		t.Fatalf("remove with a failing checkpoint = %v, want refused", err)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "work.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("the worktree's work after refusals = %q, %v", b, err)
	}
	cps.fail = nil
	if err := cl.ResetWorktree(ctx, p.ID, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wt, "work.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reset kept work.txt: %v", err)
	}
	os.WriteFile(filepath.Join(wt, "more.txt"), []byte("two\n"), 0o644)
	if _, err := cl.RemoveWorktree(ctx, p.ID, "w", true); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Checkpoints(ctx, p.ID, "w")
	if err != nil || len(res.Checkpoints) != 2 || res.Checkpoints[0].Reason != "worktree reset" || res.Checkpoints[1].Reason != "worktree remove" {
		t.Fatalf("checkpoints after reset and remove = %+v, %v; want one of each", res, err)
	}
	d, err := cl.CheckpointDiff(ctx, p.ID, "w", 2, false)
	if err != nil || !strings.Contains(d.Diff, "more.txt") || !strings.Contains(d.Diff, "+two") {
		t.Fatalf("the removal's checkpoint = %+v, %v; want more.txt kept", d, err)
	}
	if d, err := cl.CheckpointDiff(ctx, p.ID, "w", 1, false); err != nil || !strings.Contains(d.Diff, "+one") {
		t.Fatalf("the reset's checkpoint = %+v, %v; want work.txt kept", d, err)
	}
	if _, err := cl.Rewind(ctx, p.ID, "w", 1); !errors.Is(err, troupe.ErrConflict) || !strings.Contains(err.Error(), "no worktree") {
		t.Fatalf("rewind of a removed worktree = %v, want a conflict saying it has none", err)
	}
}

// failingCheckpoints fails Save with fail when set.
type failingCheckpoints struct {
	managerCheckpoints
	fail error
}

func (c *failingCheckpoints) Save(ctx context.Context, k troupe.RuntimeKey, work, reason string) (worktree.Checkpoint, error) {
	if c.fail != nil {
		return worktree.Checkpoint{}, c.fail
	}
	return c.managerCheckpoints.Save(ctx, k, work, reason)
}
