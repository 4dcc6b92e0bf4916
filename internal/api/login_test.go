package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
)

// TestAPISessionCookieLastsTheIdleTime: the session cookie carries
// Max-Age and Expires of the session's idle limit (a browser restart keeps
// it), and each use sets it again from that moment, as the session's own
// idle time starts again.
func TestAPISessionCookieLastsTheIdleTime(t *testing.T) {
	clk := newClock()
	f := newFixtureWith(t, api.Options{SessionIdle: time.Hour, Now: clk.Now})
	check := func(what string, c *http.Cookie) {
		t.Helper()
		if c.MaxAge != 3600 || !c.Expires.Equal(clk.Now().Add(time.Hour).Truncate(time.Second)) {
			t.Errorf("%s: Max-Age %d, Expires %v; want 3600 and %v", what, c.MaxAge, c.Expires, clk.Now().Add(time.Hour))
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
			t.Errorf("%s: cookie %+v, want HttpOnly, SameSite=Strict, Path=/", what, c)
		}
	}
	c := f.login(t)
	check("at login", c)

	clk.Advance(50 * time.Minute)
	for _, path := range []string{"/api/status", "/"} {
		req, _ := http.NewRequest("GET", f.ts.URL+path, nil)
		req.AddCookie(c)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(resp.Cookies()) != 1 || resp.Cookies()[0].Value != c.Value {
			t.Fatalf("GET %s with the cookie: %d, cookies %v; want the session's cookie set again", path, resp.StatusCode, resp.Cookies())
		}
		check("after a use 50 min later ("+path+")", resp.Cookies()[0])
	}
	// The bearer token sets no cookie.
	req, _ := http.NewRequest("GET", f.ts.URL+"/api/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil || len(resp.Cookies()) != 0 {
		t.Errorf("a token's request: %v, cookies %v", err, resp.Cookies())
	}
}

// TestAPILoginLinkRefusedIsAPage: a used or unknown login link answers
// a page, not JSON: what happened and the command for a new link; so does
// the UI for a browser not logged in.
func TestAPILoginLinkRefusedIsAPage(t *testing.T) {
	f := newFixture(t)
	u := f.srv.LoginURL()
	f.login(t) // another link
	if resp, err := noFollow.Get(u); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %v %v", resp, err)
	}
	for _, c := range []struct{ what, url, want string }{
		{"a used link", u, "already used"},
		{"an unknown link", f.ts.URL + "/login?token=nope", "unknown"},
		{"the UI, not logged in", f.ts.URL + "/", "login link"},
	} {
		resp, err := noFollow.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.HasPrefix(body, "<!doctype html>") || !strings.Contains(body, c.want) || !strings.Contains(body, "<code>troupe status --login</code>") {
			t.Errorf("%s: %d %s\n%s\nwant a 401 HTML page saying %q and the command", c.what, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != "default-src 'self'" || strings.Contains(body, "<script") || strings.Contains(body, "style") {
			t.Errorf("%s: CSP %q; the page must need no inline script or style:\n%s", c.what, csp, body)
		}
	}
}

// TestAPIFavicon: the icon is served to anyone (a browser asks before
// logging in) at /favicon.ico and /favicon.svg.
func TestAPIFavicon(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/favicon.ico", "/favicon.svg"} {
		a := f.get(t, path, nil)
		if a.StatusCode != 200 || !strings.HasPrefix(a.Body, "<svg") {
			t.Errorf("GET %s: %d %q, want the SVG icon", path, a.StatusCode, a.Body)
		}
		resp, err := http.Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "image/svg+xml" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
	}
}
