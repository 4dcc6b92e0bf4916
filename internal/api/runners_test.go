package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fakeRunners is the daemon's runners as the API sees them: runners
// by name, each with its credentials.
type fakeRunners struct {
	mu    sync.Mutex
	infos map[string]api.RunnerInfo
	calls []string
}

func (f *fakeRunners) List() []api.RunnerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.RunnerInfo
	for _, ri := range f.infos {
		out = append(out, ri)
	}
	return out
}

func (f *fakeRunners) Add(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "add "+name)
	if _, ok := f.infos[name]; ok {
		return nil, fmt.Errorf("runner %s has credentials already: %w", name, troupe.ErrAlreadyExists)
	}
	f.infos[name] = api.RunnerInfo{Name: name}
	return []byte("-----BEGIN NATS USER JWT-----\n" + name + "\n"), nil
}

func (f *fakeRunners) Revoke(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "revoke "+name)
	if _, ok := f.infos[name]; !ok {
		return fmt.Errorf("runner %s: %w", name, troupe.ErrNotFound)
	}
	delete(f.infos, name)
	return nil
}

// TestAPIRunners: GET /api/runners lists every runner by name, lists
// never null; POST mints a runner's credentials and answers them once,
// not to be cached; DELETE revokes them; a bad name is 400 naming the
// field without reaching the daemon's runners; a name taken is 409, an
// unknown one 404.
func TestAPIRunners(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rs := &fakeRunners{infos: map[string]api.RunnerInfo{
		"gpu-box": {Name: "gpu-box", Labels: []string{"gpu"}, Connected: true, ConnectedSince: since, LastSeen: since.Add(time.Minute),
			Agents: []api.RunnerAgent{{Project: "p1", Agent: "coder", State: troupe.StateBusy}}, Load: api.RunnerLoad{Agents: 1, MaxAgents: 4}},
		"arm": {Name: "arm", LastSeen: since},
	}}
	f := newFixtureWith(t, api.Options{Runners: rs})
	cl := client.New(f.ts.URL, token)
	ctx := t.Context()

	list, err := cl.Runners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "arm" || list[1].Name != "gpu-box" {
		t.Fatalf("runners = %+v; want arm, gpu-box", list)
	}
	if g := list[1]; !g.Connected || !g.ConnectedSince.Equal(since) || g.Load != (api.RunnerLoad{Agents: 1, MaxAgents: 4}) ||
		len(g.Agents) != 1 || g.Agents[0].Agent != "coder" || g.Agents[0].State != troupe.StateBusy {
		t.Errorf("gpu-box = %+v", g)
	}
	var raw []map[string]any
	if code := f.do(t, "GET", "/api/runners", "", &raw); code != 200 || raw[0]["labels"] == nil || raw[0]["agents"] == nil || raw[0]["connected_since"] != nil {
		t.Errorf("arm on the wire: %d %v; want labels and agents [], no connected_since", code, raw[0])
	}

	creds, err := cl.AddRunner(ctx, "new-box")
	if err != nil {
		t.Fatal(err)
	}
	if creds.Name != "new-box" || creds.Creds != "-----BEGIN NATS USER JWT-----\nnew-box\n" || !strings.Contains(creds.Note, "shown once") ||
		!strings.Contains(creds.Note, "troupe runner --creds FILE") {
		t.Errorf("creds = %+v; want the creds file's text and a note saying it is shown once", creds)
	}
	req, _ := http.NewRequest("POST", f.ts.URL+"/api/runners", strings.NewReader(`{"name":"other"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("POST /api/runners: %d, Cache-Control %q; want 201, no-store", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	if _, err := cl.AddRunner(ctx, "new-box"); !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Errorf("add twice = %v; want already exists", err)
	}
	for _, bad := range []string{"", "GPU", "a_b", "-a", strings.Repeat("a", 33), "a/b"} {
		if _, err := cl.AddRunner(ctx, bad); !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "name: bad runner name") {
			t.Errorf("add %q = %v; want 400 naming the field", bad, err)
		}
	}
	if err := cl.RevokeRunner(ctx, "Bad_Name"); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("revoke a bad name = %v; want 400", err)
	}
	if err := cl.RevokeRunner(ctx, "arm"); err != nil {
		t.Fatal(err)
	}
	if err := cl.RevokeRunner(ctx, "arm"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("revoke twice = %v; want not found", err)
	}
	want := []string{"add new-box", "add other", "add new-box", "revoke arm", "revoke arm"}
	if !slices.Equal(rs.calls, want) {
		t.Errorf("the runners were asked %q; want %q (bad names refused before)", rs.calls, want)
	}
}

// TestAPIRunnersArePersonOnly: without the API token or a browser
// session every runner route is 401 and the daemon's runners are not
// asked.
func TestAPIRunnersArePersonOnly(t *testing.T) {
	rs := &fakeRunners{infos: map[string]api.RunnerInfo{"a": {Name: "a"}}}
	f := newFixtureWith(t, api.Options{Runners: rs})
	for _, hdr := range []string{"", "Bearer nope"} {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/runners", ""},
			{"POST", "/api/runners", `{"name":"evil"}`},
			{"DELETE", "/api/runners/a", ""},
		} {
			req, _ := http.NewRequest(c.method, f.ts.URL+c.path, strings.NewReader(c.body))
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", c.method, c.path, hdr, resp.StatusCode)
			}
		}
	}
	if len(rs.calls) != 0 {
		t.Errorf("the runners were asked %q", rs.calls)
	}
}

// TestAPIRunnersOff: a daemon started without --runners answers every
// runner route with an error saying to start it with --runners.
func TestAPIRunnersOff(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/runners", ""},
		{"POST", "/api/runners", `{"name":"a"}`},
		{"DELETE", "/api/runners/a", ""},
	} {
		var e api.Error
		req, _ := http.NewRequest(c.method, f.ts.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Error, "troupe serve --runners ADDR") {
			t.Errorf("%s %s: %d %q; want 503 saying to start troupe serve --runners ADDR", c.method, c.path, resp.StatusCode, e.Error)
		}
	}
}

// TestAPIAgentsSayWhereTheyRun: each agent row says where it runs: the
// runner it is placed on, else the one its team names; empty for an
// agent on this machine; the labels its team requires.
func TestAPIAgentsSayWhereTheyRun(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte(`[[agent]]
name = "local"
engine = "fake"
[[agent]]
name = "named"
engine = "fake"
runner = "gpu-box"
[[agent]]
name = "labelled"
engine = "fake"
runner_labels = ["gpu"]
[[agent]]
name = "waiting"
engine = "fake"
runner_labels = ["arm"]
`), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	rs := &fakeRunners{infos: map[string]api.RunnerInfo{}}
	f := newFixtureWith(t, api.Options{Runners: rs})
	cl := client.New(f.ts.URL, token)
	p, err := cl.AddProject(t.Context(), dir)
	if err != nil || p.TeamError != "" {
		t.Fatalf("add = %+v, %v", p, err)
	}
	rs.infos["box-2"] = api.RunnerInfo{Name: "box-2", Agents: []api.RunnerAgent{{Project: p.ID, Agent: "labelled"}, {Project: "pother", Agent: "waiting"}}}
	as, err := cl.Agents(t.Context(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[troupe.AgentID]string{}
	for _, a := range as {
		got[a.Name] = a.Runner + " " + strings.Join(a.RunnerLabels, ",")
	}
	want := map[troupe.AgentID]string{"local": " ", "named": "gpu-box ", "labelled": "box-2 gpu", "waiting": " arm"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("agent %s runs on %q; want %q", k, got[k], v)
		}
	}
}
