package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

const token = "secret-token"

type fixture struct {
	srv  *api.Server
	ts   *httptest.Server
	hub  *events.Hub
	reg  *project.Registry
	addr string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, api.Options{})
}

// newFixtureWith serves o, its registry, hub, token and version filled in.
func newFixtureWith(t testing.TB, o api.Options) *fixture {
	t.Helper()
	return newFixtureHub(t, o, events.Options{})
}

// newFixtureHub is newFixtureWith with a hub made with ho.
func newFixtureHub(t testing.TB, o api.Options, ho events.Options) *fixture {
	t.Helper()
	hub := events.New(ho)
	reg, err := project.Open(context.Background(), project.Options{Store: project.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	reg.Listen(func(c troupe.TeamChange) {
		hub.Publish(troupe.RuntimeKey{Project: c.Project}, events.TeamChanged{TeamChange: c})
	}, nil)
	if o.Token == "" {
		o.Token = token
	}
	o.Registry, o.Hub, o.Version = reg, hub, "test"
	srv := api.New(o)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	srv.SetAddr(addr)
	return &fixture{srv: srv, ts: ts, hub: hub, reg: reg, addr: addr}
}

// answer is a response read whole.
type answer struct {
	StatusCode int
	Body       string
}

// get GETs path with the headers hdr ("Host" sets the request's Host).
func (f *fixture) get(t *testing.T, path string, hdr map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest("GET", f.ts.URL+path, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

func TestAPIRequiresToken(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", nil, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"not bearer", map[string]string{"Authorization": "Basic " + token}, 401},
		{"good token", map[string]string{"Authorization": "Bearer " + token}, 200},
	} {
		for _, path := range []string{"/api/status", "/api/projects", "/api/events?since=0"} {
			if c.want == 200 && path == "/api/events?since=0" {
				continue // a stream; covered below
			}
			if got := f.get(t, path, c.hdr).StatusCode; got != c.want {
				t.Errorf("%s %s: status %d, want %d", c.name, path, got, c.want)
			}
		}
	}
}

func TestAPIRefusesForeignHostAndOrigin(t *testing.T) {
	f := newFixture(t)
	_, port, _ := strings.Cut(f.addr, ":")
	auth := "Bearer " + token
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"rebinding host", map[string]string{"Host": "evil.example:" + port, "Authorization": auth}, 403},
		{"right name, wrong port", map[string]string{"Host": "localhost:1", "Authorization": auth}, 403},
		{"localhost", map[string]string{"Host": "localhost:" + port, "Authorization": auth}, 200},
		{"foreign origin", map[string]string{"Origin": "http://evil.example", "Authorization": auth}, 403},
		{"https origin of ours", map[string]string{"Origin": "https://" + f.addr, "Authorization": auth}, 403},
		{"our origin", map[string]string{"Origin": "http://" + f.addr, "Authorization": auth}, 200},
		{"login with foreign host", map[string]string{"Host": "evil.example"}, 403},
	} {
		path := "/api/status"
		if strings.HasPrefix(c.name, "login") {
			path = "/login?token=x"
		}
		if got := f.get(t, path, c.hdr).StatusCode; got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAPILoginLinkIsOneTime(t *testing.T) {
	f := newFixture(t)
	u := f.srv.LoginURL()
	resp, err := noFollow.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie not HttpOnly+SameSite=Strict: %+v", cookie)
	}
	req, _ := http.NewRequest("GET", f.ts.URL+"/api/status", nil)
	req.AddCookie(cookie)
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 200 {
		t.Fatalf("cookie refused: %d", resp.StatusCode)
	}
	if resp, _ := noFollow.Get(u); resp.StatusCode != 401 {
		t.Fatalf("login link reused: %d, want 401", resp.StatusCode)
	}
}

// clock is a settable clock for the server's Options.Now.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// login uses a fresh login link and returns the session cookie.
func (f *fixture) login(t *testing.T) *http.Cookie {
	t.Helper()
	resp, err := noFollow.Get(f.srv.LoginURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// withCookie GETs path with the session cookie c and returns the status
// and the error message of a non-2xx answer.
func (f *fixture) withCookie(t *testing.T, path string, c *http.Cookie) (int, string) {
	t.Helper()
	a := f.get(t, path, map[string]string{"Cookie": c.Name + "=" + c.Value})
	var e api.Error
	if json.Unmarshal([]byte(a.Body), &e) != nil {
		e.Error = a.Body // the page at /
	}
	return a.StatusCode, e.Error
}

func TestAPILoginSessionExpiresWhenIdle(t *testing.T) {
	clk := newClock()
	f := newFixtureWith(t, api.Options{SessionIdle: time.Hour, Now: clk.Now})
	active, idle := f.login(t), f.login(t)
	// Each use refreshes the session: 3 h of requests 50 min apart.
	for range 4 {
		clk.Advance(50 * time.Minute)
		if code, msg := f.withCookie(t, "/api/status", active); code != 200 {
			t.Fatalf("active session refused after %v: %d %s", 50*time.Minute, code, msg)
		}
	}
	unknown := &http.Cookie{Name: active.Name, Value: "not-a-session"}
	for _, c := range []struct {
		name   string
		cookie *http.Cookie
		path   string
	}{
		{"idle session", idle, "/api/status"},
		{"unknown session", unknown, "/api/status"},
		{"unknown session, page", unknown, "/"},
	} {
		code, msg := f.withCookie(t, c.path, c.cookie)
		if code != http.StatusUnauthorized || !strings.Contains(msg, "troupe status --login") {
			t.Errorf("%s: %d %q; want 401 saying to run troupe status --login", c.name, code, msg)
		}
	}
	// Expiry is at the idle time, not later; an expired session stays gone.
	clk.Advance(time.Hour)
	if code, _ := f.withCookie(t, "/api/status", active); code != http.StatusUnauthorized {
		t.Errorf("session unused for exactly the idle time: %d, want 401", code)
	}
	clk.Advance(-30 * time.Minute)
	if code, _ := f.withCookie(t, "/api/status", active); code != http.StatusUnauthorized {
		t.Errorf("expired session came back: %d, want 401", code)
	}
	// The bearer token does not expire.
	if code := f.get(t, "/api/status", map[string]string{"Authorization": "Bearer " + token}).StatusCode; code != 200 {
		t.Errorf("token after the sessions expired: %d", code)
	}
}

func TestAPILoginSessionDefaultIdleIs12h(t *testing.T) {
	clk := newClock()
	f := newFixtureWith(t, api.Options{Now: clk.Now})
	c := f.login(t)
	clk.Advance(12*time.Hour - time.Second)
	if code, _ := f.withCookie(t, "/api/status", c); code != 200 {
		t.Fatalf("session idle just under 12h: %d, want 200", code)
	}
	clk.Advance(12 * time.Hour)
	if code, _ := f.withCookie(t, "/api/status", c); code != http.StatusUnauthorized {
		t.Fatalf("session idle 12h: %d, want 401", code)
	}
}

func TestAPILoginSessionsAreBounded(t *testing.T) {
	const bound = 1000 // maxSessions in auth.go
	clk := newClock()
	f := newFixtureWith(t, api.Options{Now: clk.Now})
	cookies := make([]*http.Cookie, bound)
	for i := range cookies {
		cookies[i] = f.login(t)
		clk.Advance(time.Second)
	}
	// The first is used again, so the second is now the least recently used.
	if code, _ := f.withCookie(t, "/api/status", cookies[0]); code != 200 {
		t.Fatalf("first session: %d", code)
	}
	clk.Advance(time.Second)
	newest := f.login(t)
	for _, c := range []struct {
		name   string
		cookie *http.Cookie
		want   int
	}{
		{"least recently used", cookies[1], 401},
		{"recently used", cookies[0], 200},
		{"third", cookies[2], 200},
		{"newest", newest, 200},
	} {
		if code, _ := f.withCookie(t, "/api/status", c.cookie); code != c.want {
			t.Errorf("%s session past the bound: %d, want %d", c.name, code, c.want)
		}
	}
	// Once all have expired, new logins still work.
	clk.Advance(13 * time.Hour)
	fresh := []*http.Cookie{f.login(t), f.login(t)}
	for _, c := range fresh {
		if code, _ := f.withCookie(t, "/api/status", c); code != 200 {
			t.Errorf("session after expiry: %d", code)
		}
	}
}

func TestAPIEventStreamResumesWithSince(t *testing.T) {
	f := newFixture(t)
	cl := client.New(f.ts.URL, token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		f.hub.Publish(troupe.RuntimeKey{Project: "p", Agent: troupe.AgentID(rune('a' + i))}, events.InboxExpired{})
	}
	read := func(since uint64, n int) []uint64 {
		var got []uint64
		_, err := cl.Events(ctx, since, func() { t.Errorf("unexpected reset from since=%d", since) }, func(ev events.Event) error {
			got = append(got, ev.Seq)
			if len(got) == n {
				return errDone
			}
			return nil
		})
		if !errors.Is(err, errDone) {
			t.Fatalf("events: %v", err)
		}
		return got
	}
	if got := read(3, 2); got[0] != 4 || got[1] != 5 {
		t.Fatalf("resume since 3 = %v, want [4 5]", got)
	}
	// Live events after the backlog, with no gap.
	go func() {
		for range 3 {
			f.hub.Publish(troupe.RuntimeKey{}, events.InboxExpired{})
		}
	}()
	if got := read(4, 4); got[0] != 5 || got[3] != 8 {
		t.Fatalf("resume since 4 then live = %v, want 5..8", got)
	}
	// A since from another daemon run (ahead of this hub) asks for a reset.
	resets := 0
	go f.hub.Publish(troupe.RuntimeKey{}, events.InboxExpired{})
	_, err := cl.Events(ctx, 1000, func() { resets++ }, func(ev events.Event) error {
		if ev.Seq == 9 {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) || resets != 1 {
		t.Fatalf("since ahead: err %v, resets %d; want one reset then the events", err, resets)
	}
	if f.get(t, "/api/events?since=abc", map[string]string{"Authorization": "Bearer " + token}).StatusCode != 400 {
		t.Error("since=abc not refused with 400")
	}
}

var errDone = errors.New("done")

// teamDir is a project folder with a team of one fake agent, "a".
func teamDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"a\"\nengine = \"fake\"\n"), 0o644)
	return dir
}

func TestAPIProjectsAndAgents(t *testing.T) {
	f := newFixture(t)
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	dir := teamDir(t)
	p, err := cl.AddProject(ctx, dir)
	if err != nil || p.Agents != 1 || p.Team != "ok" {
		t.Fatalf("add: %+v %v", p, err)
	}
	if _, err := cl.AddProject(ctx, dir); !errors.Is(err, troupe.ErrAlreadyExists) {
		t.Fatalf("add twice: %v, want ErrAlreadyExists", err)
	}
	if _, err := cl.AddProject(ctx, ""); !errors.Is(err, troupe.ErrInvalid) || !strings.Contains(err.Error(), "path") {
		t.Fatalf("add empty path: %v, want invalid naming path", err)
	}
	as, err := cl.Agents(ctx, p.ID)
	if err != nil || len(as) != 1 || as[0].State != troupe.StateStopped || as[0].Project != p.ID {
		t.Fatalf("agents: %+v %v", as, err)
	}
	if _, err := cl.Agents(ctx, "pnope"); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("agents of unknown project: %v", err)
	}
	if err := cl.RemoveProject(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveProject(ctx, p.ID); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
}

// TestAPIProjectListShowsTeamStatus: each listed project says whether its
// team loaded ("ok", "error" with the reason, "none") and how many agents
// it has.
func TestAPIProjectListShowsTeamStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cl := client.New(f.ts.URL, token)
	good := teamDir(t)
	bad := t.TempDir()
	os.MkdirAll(filepath.Join(bad, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(bad, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"a\"\nengine = \"fake\"\nbogus = 1\n"), 0o644)
	for _, d := range []string{good, bad} {
		if _, err := cl.AddProject(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var ps []map[string]any
	if err := json.Unmarshal([]byte(f.getBody(t, "/api/projects")), &ps); err != nil || len(ps) != 2 {
		t.Fatalf("projects: %v %v", ps, err)
	}
	for _, p := range ps {
		switch p["path"] {
		case mustReal(t, good):
			if p["team"] != "ok" || p["agents"] != 1.0 || p["team_error"] != nil {
				t.Errorf("good project: %v", p)
			}
		case mustReal(t, bad):
			if p["team"] != "error" || p["agents"] != 0.0 || !strings.Contains(fmt.Sprint(p["team_error"]), "bogus") {
				t.Errorf("bad project: %v", p)
			}
		default:
			t.Errorf("unknown project %v", p)
		}
	}
}

func mustReal(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fakeTasks is a task manager holding one task per Start, all running.
type fakeTasks struct {
	mu    sync.Mutex
	tasks []task.Task
}

func (f *fakeTasks) Start(_ context.Context, owner troupe.RuntimeKey, _ string, j task.Job) (task.Task, error) {
	command, cwd, timeout := j.Command, j.Cwd, j.Timeout
	f.mu.Lock()
	defer f.mu.Unlock()
	t := task.Task{ID: task.ID(fmt.Sprint("t", len(f.tasks)+1)), Project: owner.Project, Owner: owner.Agent,
		Command: command, Cwd: cwd, Timeout: timeout, State: task.Running, ExitCode: -1,
		StartedAt: time.Now(), SupervisorPID: 4242, SupervisorStart: 99, Notified: false}
	f.tasks = append(f.tasks, t)
	return t, nil
}

func (f *fakeTasks) Task(_ context.Context, p troupe.ProjectID, id task.ID) (task.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tasks {
		if t.ID == id && t.Project == p {
			return t, nil
		}
	}
	return task.Task{}, fmt.Errorf("task %s: %w", id, troupe.ErrNotFound)
}

func (f *fakeTasks) Tasks(_ context.Context, p troupe.ProjectID) ([]task.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tasks), nil
}

func (f *fakeTasks) Kill(context.Context, troupe.ProjectID, task.ID) error { return nil }

func (f *fakeTasks) Output(context.Context, troupe.ProjectID, task.ID, int) (string, error) {
	return "", nil
}

// TestAPITaskJSONHidesTheSupervisorUnlessAsked: the supervisor's pid and
// start and the notified flag are the daemon's bookkeeping; ?debug=1 shows
// them, under "debug".
func TestAPITaskJSONHidesTheSupervisorUnlessAsked(t *testing.T) {
	f := newFixtureWith(t, api.Options{Tasks: &fakeTasks{}})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	p, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := cl.RunTask(ctx, p.ID, api.RunTaskRequest{Command: "make test", TimeoutSeconds: 60, Owner: "a"})
	if err != nil || tk.Debug != nil || tk.Owner != "a" || tk.Timeout != api.Duration(time.Minute) || tk.State != task.Running {
		t.Fatalf("run: %+v %v", tk, err)
	}
	if tk, err = cl.TaskDebug(ctx, p.ID, tk.ID); err != nil || tk.Debug == nil || tk.Debug.SupervisorPID != 4242 || tk.Debug.SupervisorStart != 99 {
		t.Fatalf("task with debug: %+v %v", tk, err)
	}
	base := "/api/projects/" + string(p.ID) + "/tasks"
	for _, c := range []struct {
		path      string
		wantDebug bool
	}{
		{base, false},
		{base + "/" + string(tk.ID), false},
		{base + "?debug=0", false},
		{base + "?debug=1", true},
		{base + "/" + string(tk.ID) + "?debug=true", true},
	} {
		raw := f.getBody(t, c.path)
		for _, hidden := range []string{"supervisor_pid", "supervisor_start", "notified"} {
			if strings.Contains(strings.SplitN(raw, `"debug"`, 2)[0], hidden) {
				t.Errorf("%s shows %s outside debug: %s", c.path, hidden, raw)
			}
		}
		if got := strings.Contains(raw, `"debug":{"supervisor_pid":4242,"supervisor_start":99,"notified":false}`); got != c.wantDebug {
			t.Errorf("%s: debug part shown %v, want %v: %s", c.path, got, c.wantDebug, raw)
		}
		for _, field := range []string{`"id":"t1"`, `"owner":"a"`, `"state":"running"`, `"exit_code":-1`, `"command":"make test"`, `"timeout":"1m0s"`} {
			if !strings.Contains(raw, field) {
				t.Errorf("%s lacks %s: %s", c.path, field, raw)
			}
		}
	}
	if code := f.get(t, base+"?debug=maybe", map[string]string{"Authorization": "Bearer " + token}).StatusCode; code != 400 {
		t.Errorf("debug=maybe: %d, want 400", code)
	}
}

// getBody GETs path with the token and returns the body of a 200 answer.
func (f *fixture) getBody(t *testing.T, path string) string {
	t.Helper()
	a := f.get(t, path, map[string]string{"Authorization": "Bearer " + token})
	if a.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, a.StatusCode, a.Body)
	}
	return a.Body
}

// TestVersionHeader: an authorized answer names the daemon's version (the
// CLI warns when it is not its own); a refused one does not.
func TestVersionHeader(t *testing.T) {
	f := newFixture(t) // its daemon says it runs "test"
	for _, c := range []struct {
		auth string
		want string
	}{{"Bearer " + token, "test"}, {"", ""}} {
		req, _ := http.NewRequest("GET", f.ts.URL+"/api/status", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(api.VersionHeader); got != c.want {
			t.Errorf("auth %q: %s = %q, want %q", c.auth, api.VersionHeader, got, c.want)
		}
	}
}

// TestAPIProjectRemovalIsTheDaemons: DELETE /api/projects/{id} hands the
// whole removal to Options.RemoveProject and answers what it reports; its
// error is the answer's.
func TestAPIProjectRemovalIsTheDaemons(t *testing.T) {
	var mu sync.Mutex
	var calls []troupe.ProjectID // mu guards calls
	report := api.RemoveProjectResponse{Worktrees: []worktree.Removal{{Agent: "a", Path: "/w/a", Branch: "troupe/a", Reason: "uncommitted work"}}}
	f := newFixtureWith(t, api.Options{RemoveProject: func(_ context.Context, id troupe.ProjectID) (api.RemoveProjectResponse, error) {
		mu.Lock()
		calls = append(calls, id)
		mu.Unlock()
		if id == "pgone" {
			return api.RemoveProjectResponse{}, fmt.Errorf("remove project %s: %w", id, troupe.ErrNotFound)
		}
		return report, nil
	}})
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	got, err := cl.RemoveProjectReport(ctx, "p1")
	if err != nil || len(got.Worktrees) != 1 || got.Worktrees[0] != report.Worktrees[0] {
		t.Fatalf("remove: %+v, %v; want the remover's report", got, err)
	}
	if _, err := cl.RemoveProjectReport(ctx, "pgone"); !errors.Is(err, troupe.ErrNotFound) {
		t.Fatalf("remove a project the remover does not know: %v, want ErrNotFound", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, []troupe.ProjectID{"p1", "pgone"}) {
		t.Errorf("remover called for %v", calls)
	}
}
