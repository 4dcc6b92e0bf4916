package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
)

// post POSTs body to path with the token and returns the answer.
func (f *fixture) post(t *testing.T, path, body string) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", f.ts.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// errorOf decodes an error answer's sentence.
func errorOf(t *testing.T, a answer) string {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal([]byte(a.Body), &e); err != nil || e.Error == "" {
		t.Fatalf("answer %d %q is not an API error", a.StatusCode, a.Body)
	}
	return e.Error
}

// TestAPINULInPathIs400: a NUL byte in a URL path, a query parameter or a
// path field of a body is the caller's mistake (400 saying so), never a
// 500 from the kernel refusing the path.
func TestAPINULInPathIs400(t *testing.T) {
	f := newFixtureWith(t, api.Options{Tasks: &fakeTasks{}})
	auth := map[string]string{"Authorization": "Bearer " + token}
	p, err := client.New(f.ts.URL, token).AddProject(context.Background(), teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		do   func() answer
	}{
		{"resolve ref", func() answer { return f.get(t, "/api/projects/resolve?ref=/tmp/a%00b", auth) }},
		{"project id in path", func() answer { return f.get(t, "/api/projects/p%00x/agents", auth) }},
		{"agent in path", func() answer { return f.get(t, "/api/projects/"+string(p.ID)+"/agents/a%00/log", auth) }},
		{"add project", func() answer { return f.post(t, "/api/projects", `{"path":"/tmp/a\u0000b"}`) }},
		{"task cwd", func() answer {
			return f.post(t, "/api/projects/"+string(p.ID)+"/tasks", `{"command":"true","cwd":"sub\u0000dir"}`)
		}},
	} {
		a := c.do()
		if a.StatusCode != http.StatusBadRequest || !strings.Contains(errorOf(t, a), "NUL") {
			t.Errorf("%s: %d %s; want 400 naming the NUL byte", c.name, a.StatusCode, a.Body)
		}
	}
}

// TestAPITrailingDataAfterJSONIs400: a body is one JSON object; anything
// after it but white space is refused, and so is a body over 1 MB (413).
func TestAPITrailingDataAfterJSONIs400(t *testing.T) {
	f := newFixture(t)
	dir := teamDir(t)
	quoted, _ := json.Marshal(dir)
	obj := `{"path":` + string(quoted) + `}`
	for _, body := range []string{obj + ` {"b":2}`, obj + `garbage`, obj + `]`, obj + obj} {
		a := f.post(t, "/api/projects", body)
		if a.StatusCode != http.StatusBadRequest || !strings.Contains(errorOf(t, a), "unexpected data after the JSON object") {
			t.Errorf("body %q: %d %s; want 400 unexpected data after the JSON object", body, a.StatusCode, a.Body)
		}
	}
	if a := f.post(t, "/api/projects", ""); a.StatusCode != http.StatusBadRequest {
		t.Errorf("empty body: %d %s; want 400", a.StatusCode, a.Body)
	}
	big := `{"path":"/` + strings.Repeat("x", 1<<20) + `"}`
	if a := f.post(t, "/api/projects", big); a.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, a), "send less") {
		t.Errorf("body over 1 MB: %d %.200s; want 413", a.StatusCode, a.Body)
	}
	if a := f.post(t, "/api/projects", obj+"\n\t "); a.StatusCode != http.StatusCreated {
		t.Errorf("body with trailing white space: %d %s; want 201", a.StatusCode, a.Body)
	}
}

// TestAPIRelativeProjectPathIs400: the daemon's working directory is not
// the caller's, so project paths are absolute (docs/API.md).
func TestAPIRelativeProjectPathIs400(t *testing.T) {
	f := newFixture(t)
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, c := range []struct {
		name string
		a    answer
	}{
		{"add", f.post(t, "/api/projects", `{"path":"code/app"}`)},
		{"add dot", f.post(t, "/api/projects", `{"path":"."}`)},
		{"resolve", f.get(t, "/api/projects/resolve?ref=code/app", auth)},
	} {
		if c.a.StatusCode != http.StatusBadRequest || !strings.Contains(errorOf(t, c.a), "absolute path") {
			t.Errorf("%s: %d %s; want 400 asking for an absolute path", c.name, c.a.StatusCode, c.a.Body)
		}
	}
	// A project id is still a ref.
	p, err := client.New(f.ts.URL, token).AddProject(context.Background(), teamDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.get(t, "/api/projects/resolve?ref="+string(p.ID), auth); a.StatusCode != 200 {
		t.Errorf("resolve by id: %d %s", a.StatusCode, a.Body)
	}
}

// TestAPIRemoteAddressChecksPublicName: a daemon bound to 0.0.0.0 (with
// --allow-remote) still checks Host and Origin: loopback names and the
// configured public name pass, others do not — nor does the unspecified
// address itself, which names no host.
func TestAPIRemoteAddressChecksPublicName(t *testing.T) {
	auth := "Bearer " + token
	for _, public := range []string{"box.example", ""} {
		f := newFixtureWith(t, api.Options{PublicName: public})
		_, port, _ := strings.Cut(f.addr, ":")
		f.srv.SetAddr("0.0.0.0:" + port)
		want := func(ok bool) int {
			if ok {
				return 200
			}
			return 403
		}
		for _, c := range []struct {
			name string
			hdr  map[string]string
			want int
		}{
			{"public name", map[string]string{"Host": "box.example:" + port, "Authorization": auth}, want(public != "")},
			{"public origin", map[string]string{"Origin": "http://box.example:" + port, "Authorization": auth}, want(public != "")},
			{"loopback", map[string]string{"Host": "127.0.0.1:" + port, "Authorization": auth}, 200},
			{"localhost origin", map[string]string{"Origin": "http://localhost:" + port, "Authorization": auth}, 200},
			{"other host", map[string]string{"Host": "evil.example:" + port, "Authorization": auth}, 403},
			{"unspecified host", map[string]string{"Host": "0.0.0.0:" + port, "Authorization": auth}, 403},
			{"other origin", map[string]string{"Origin": "http://evil.example:" + port, "Authorization": auth}, 403},
		} {
			if got := f.get(t, "/api/status", c.hdr).StatusCode; got != c.want {
				t.Errorf("public name %q, %s: %d, want %d", public, c.name, got, c.want)
			}
		}
	}
}

// TestAPILoginURLNeverUnspecified: the login link names a host a browser
// can open: 127.0.0.1 for 0.0.0.0 and [::], the public name when set.
func TestAPILoginURLNeverUnspecified(t *testing.T) {
	for _, c := range []struct{ public, addr, want string }{
		{"", "[::]:7433", "http://127.0.0.1:7433/login?token="},
		{"", "0.0.0.0:7433", "http://127.0.0.1:7433/login?token="},
		{"", "[::1]:7433", "http://[::1]:7433/login?token="},
		{"", "127.0.0.1:7433", "http://127.0.0.1:7433/login?token="},
		{"box.example", "[::]:7433", "http://box.example:7433/login?token="},
		{"box.example", "0.0.0.0:7433", "http://box.example:7433/login?token="},
	} {
		f := newFixtureWith(t, api.Options{PublicName: c.public})
		f.srv.SetAddr(c.addr)
		if u := f.srv.LoginURL(); !strings.HasPrefix(u, c.want) {
			t.Errorf("public %q, addr %s: login URL %s, want %s…", c.public, c.addr, u, c.want)
		}
	}
	for addr, want := range map[string]string{"[::]:1": "127.0.0.1:1", "0.0.0.0:1": "127.0.0.1:1", ":1": "127.0.0.1:1",
		"[::1]:1": "[::1]:1", "10.0.0.2:1": "10.0.0.2:1"} {
		if got := api.LocalAddr(addr); got != want {
			t.Errorf("LocalAddr(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestAPILoginLinkExpiresUnused: a login link not used within 10 minutes
// is refused, saying to get a new one.
func TestAPILoginLinkExpiresUnused(t *testing.T) {
	clk := newClock()
	f := newFixtureWith(t, api.Options{Now: clk.Now})
	use := func(u string) answer {
		t.Helper()
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := noFollow.Get(f.ts.URL + "/login?" + pu.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(b)}
	}
	fresh := f.srv.LoginURL()
	clk.Advance(api.LoginLinkTTL - time.Second)
	if a := use(fresh); a.StatusCode != http.StatusSeeOther {
		t.Fatalf("link used just before 10 min: %d %s", a.StatusCode, a.Body)
	}
	stale := f.srv.LoginURL()
	clk.Advance(api.LoginLinkTTL)
	a := use(stale)
	if a.StatusCode != http.StatusUnauthorized || !strings.Contains(a.Body, "expired") || !strings.Contains(a.Body, "troupe status --login") {
		t.Fatalf("link used after 10 min: %d %s; want 401 saying it expired", a.StatusCode, a.Body)
	}
	if api.LoginLinkTTL != 10*time.Minute {
		t.Errorf("LoginLinkTTL = %v, want 10m", api.LoginLinkTTL)
	}
}
