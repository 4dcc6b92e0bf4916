package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

const token = "secret-token"

type fixture struct {
	srv  *api.Server
	ts   *httptest.Server
	hub  *events.Hub
	reg  *project.Registry
	addr string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	hub := events.New(events.Options{})
	reg, err := project.Open(context.Background(), project.Options{Store: project.NewMemStore(),
		OnTeamChange: func(c project.TeamChange) {
			hub.Publish(troupe.RuntimeKey{Project: c.Project}, events.TeamChanged{Project: c.Project, Added: c.Added, Removed: c.Removed, Changed: c.Changed, Error: c.Error})
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Options{Registry: reg, Hub: hub, Token: token, Version: "test"})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	srv.SetAddr(addr)
	return &fixture{srv: srv, ts: ts, hub: hub, reg: reg, addr: addr}
}

func (f *fixture) get(t *testing.T, path string, hdr map[string]string) *http.Response {
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
	resp.Body.Close()
	return resp
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
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
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

func TestAPIProjectsAndAgents(t *testing.T) {
	f := newFixture(t)
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".troupe"), 0o755)
	os.WriteFile(filepath.Join(dir, ".troupe", "team.toml"), []byte("[[agent]]\nname = \"a\"\nengine = \"fake\"\n"), 0o644)
	p, err := cl.AddProject(ctx, dir)
	if err != nil || p.Agents != 1 {
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
