package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/troupe-dev/troupe/internal/journal"
	"net/http"
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

// TestAPIBrowserSessionSurvivesRestart: a browser session made by one
// server is honoured by the next one with the same session file (a daemon
// restart), which holds no cookie a reader could use; it still expires
// when idle, and a file of garbage is no session.
func TestAPIBrowserSessionSurvivesRestart(t *testing.T) {
	clk := newClock()
	file := filepath.Join(t.TempDir(), "sessions")
	o := api.Options{SessionIdle: time.Hour, Now: clk.Now, SessionFile: file}
	first := newFixtureWith(t, o)
	cookie := first.login(t)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), cookie.Value) {
		t.Error("the session file holds the cookie itself")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("session file mode %v, want 0600", fi.Mode().Perm())
	}
	clk.Advance(10 * time.Minute)
	second := newFixtureWith(t, o) // the daemon restarted
	if code, msg := second.withCookie(t, "/api/status", cookie); code != 200 {
		t.Fatalf("session after a restart: %d %s", code, msg)
	}
	// Used at +10 min and written then (persistEvery is a minute): a third
	// server at +69 min still knows it; at +70 it expired.
	clk.Advance(59 * time.Minute)
	third := newFixtureWith(t, o)
	if code, msg := third.withCookie(t, "/api/status", cookie); code != 200 {
		t.Fatalf("session used 59 min ago, after a restart: %d %s", code, msg)
	}
	clk.Advance(61 * time.Minute)
	fourth := newFixtureWith(t, o)
	if code, _ := fourth.withCookie(t, "/api/status", cookie); code != http.StatusUnauthorized {
		t.Errorf("idle session after a restart: %d, want 401", code)
	}
	os.WriteFile(file, []byte("garbage\n"+strings.Repeat("z", 64)+" notanumber\n"), 0o600)
	fifth := newFixtureWith(t, o)
	if code, _ := fifth.withCookie(t, "/api/status", cookie); code != http.StatusUnauthorized {
		t.Errorf("a garbage session file let the cookie in: %d", code)
	}
}

// TestAPIBrowserSessionEndsWithItsToken: a session made under one API
// token is refused by a daemon started with another (the token rotated:
// <state>/token deleted, the daemon restarted), and stays refused if the
// old token comes back; the file no longer lists it. A session file
// written before sessions were tied to a token (no token line) is no
// session either. The same token keeps it (the test's control).
func TestAPIBrowserSessionEndsWithItsToken(t *testing.T) {
	clk := newClock()
	file := filepath.Join(t.TempDir(), "sessions")
	o := api.Options{SessionIdle: time.Hour, Now: clk.Now, SessionFile: file}
	first := newFixtureWith(t, o)
	cookie, other := first.login(t), first.login(t)
	if code, msg := newFixtureWith(t, o).withCookie(t, "/api/status", cookie); code != 200 {
		t.Fatalf("session after a restart with the same token: %d %s", code, msg)
	}
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(old), token) {
		t.Error("the session file holds the token itself")
	}

	rotated := o
	rotated.Token = strings.Repeat("b", 64)
	second := newFixtureWith(t, rotated)
	for _, c := range []*http.Cookie{cookie, other} {
		if code, _ := second.withCookie(t, "/api/status", c); code != http.StatusUnauthorized {
			t.Errorf("a session of the old token after the rotation: %d, want 401", code)
		}
		if code, _ := second.withCookie(t, "/", c); code != http.StatusUnauthorized {
			t.Errorf("the page with a session of the old token: %d, want 401", code)
		}
	}
	fresh := second.login(t)
	if code, msg := newFixtureWith(t, rotated).withCookie(t, "/api/status", fresh); code != 200 {
		t.Fatalf("a session of the new token after a restart: %d %s", code, msg)
	}
	if code, _ := newFixtureWith(t, o).withCookie(t, "/api/status", fresh); code != http.StatusUnauthorized {
		t.Errorf("a session of the new token under the old one: %d, want 401", code)
	}
	if code, _ := newFixtureWith(t, o).withCookie(t, "/api/status", cookie); code != http.StatusUnauthorized {
		t.Errorf("a session of the old token once the old token is back: %d, want 401 (the file was rewritten)", code)
	}

	// A file of the old format: sessions without the token's line.
	var lines []string
	for line := range strings.Lines(string(old)) {
		if !strings.HasPrefix(line, "token ") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("the session file %q: want a token line and the two sessions", old)
	}
	os.WriteFile(file, []byte(strings.Join(lines, "")), 0o600)
	if code, _ := newFixtureWith(t, o).withCookie(t, "/api/status", cookie); code != http.StatusUnauthorized {
		t.Errorf("a session of a file with no token line: %d, want 401", code)
	}
}

// TestAPIWebRequestsNeedCredentialsAndOurOrigin: the page, its assets and
// the API refuse a request without the cookie or token, and a page of
// another origin cannot drive the API even with the person's cookie (the
// browser sends it along with a cross-site fetch only if SameSite allowed
// it; the Origin check refuses it regardless).
func TestAPIWebRequestsNeedCredentialsAndOurOrigin(t *testing.T) {
	web := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("the page")) })
	f := newFixtureWith(t, api.Options{Web: web})
	p, err := client.New(f.ts.URL, token).AddProject(context.Background(), teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/assets/main-ABC.js", "/api/permissions", "/api/events?project=" + string(p.ID)} {
		if code := f.get(t, path, nil).StatusCode; code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", path, code)
		}
	}
	cookie := f.login(t)
	if code, _ := f.withCookie(t, "/", cookie); code != 200 {
		t.Errorf("the page with the cookie: %d", code)
	}
	send := "/api/projects/" + string(p.ID) + "/agents/a/send"
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"http://" + f.addr, http.StatusServiceUnavailable}, // ours: it gets through (no runtime here)
	} {
		req, _ := http.NewRequest("POST", f.ts.URL+send, strings.NewReader(`{"text":"rm -rf /"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", c.origin)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST send from origin %s with the cookie: %d, want %d", c.origin, resp.StatusCode, c.want)
		}
	}
}

// TestAPIEventsScopedToProject: ?project= keeps that project's events, the
// daemon's, and every project's agent.state, agent.permission,
// team.changed and project.removed (what a page needs for "needs you" and
// the project list); other projects' output, turns and messages stay out.
// An unknown project is 404.
func TestAPIEventsScopedToProject(t *testing.T) {
	f := newFixture(t)
	cl := client.New(f.ts.URL, token)
	ctx := context.Background()
	p1, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := cl.AddProject(ctx, teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if code := f.get(t, "/api/events?project=nope", map[string]string{"Authorization": "Bearer " + token}).StatusCode; code != 404 {
		t.Errorf("unknown project: %d, want 404", code)
	}
	k1, k2 := troupe.RuntimeKey{Project: p1.ID, Agent: "a"}, troupe.RuntimeKey{Project: p2.ID, Agent: "a"}
	f.hub.Publish(k2, events.AgentActivity{Turn: "t", Event: journal.Event{Kind: journal.KindOutput, Text: "p2 output"}})
	f.hub.Publish(k2, events.AgentState{State: troupe.StateFailed, Reason: "p2 failed"})
	f.hub.Publish(k1, events.AgentActivity{Turn: "t", Event: journal.Event{Kind: journal.KindOutput, Text: "p1 output"}})
	f.hub.Publish(troupe.RuntimeKey{}, events.DaemonStarted{Addr: "x"})
	f.hub.Publish(k2, events.TurnStarted{Turn: "t2"})
	last := f.hub.Publish(k1, events.TurnEnded{Turn: "t"})

	req, _ := http.NewRequest("GET", f.ts.URL+"/api/events?since=0&project="+string(p1.ID), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(rctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev events.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Seq == 0 {
			continue // the reset
		}
		got = append(got, string(ev.Type)+" "+string(ev.Project))
		if ev.Seq == last {
			break
		}
	}
	want := []string{
		"agent.state " + string(p2.ID),
		"agent.output " + string(p1.ID),
		"daemon.started ",
		"turn.ended " + string(p1.ID),
	}
	var kept []string
	for _, g := range got {
		if !strings.HasPrefix(g, "team.changed") { // the two registrations
			kept = append(kept, g)
		}
	}
	if strings.Join(kept, "\n") != strings.Join(want, "\n") {
		t.Errorf("scoped stream:\n%s\nwant:\n%s", strings.Join(kept, "\n"), strings.Join(want, "\n"))
	}
}
