package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func get(h http.Handler, method, path, enc string) *http.Response {
	req := httptest.NewRequest(method, path, nil)
	if enc != "" {
		req.Header.Set("Accept-Encoding", enc)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestHandlerServesBuiltUI: hashed assets with a year's immutable cache,
// gzipped to browsers that accept it; index.html (for any route) with
// no-cache; the CSP on everything; a missing asset is 404.
func TestHandlerServesBuiltUI(t *testing.T) {
	js := "console.log('troupe')"
	h := handler(fstest.MapFS{
		"index.html":            {Data: []byte("<!doctype html><title>troupe</title>")},
		"index.html.gz":         {Data: gz(t, "<!doctype html><title>troupe</title>")},
		"assets/main-ABC.js":    {Data: []byte(js)},
		"assets/main-ABC.js.gz": {Data: gz(t, js)},
		"assets/main-DEF.css":   {Data: []byte("body{}")},
	})
	for _, c := range []struct {
		path, enc, wantEnc, wantCache, wantType, wantBody string
		code                                              int
	}{
		{"/assets/main-ABC.js", "gzip, deflate, br", "gzip", "immutable", "text/javascript", js, 200},
		{"/assets/main-ABC.js", "", "", "immutable", "text/javascript", js, 200},
		{"/assets/main-ABC.js", "gzip;q=0", "", "immutable", "text/javascript", js, 200},
		{"/assets/main-DEF.css", "gzip", "", "immutable", "text/css", "body{}", 200}, // no .gz copy
		{"/", "gzip", "gzip", "no-cache", "text/html", "<title>troupe</title>", 200},
		{"/p/x/agent/y", "", "", "no-cache", "text/html", "<title>troupe</title>", 200},
		{"/assets/gone.js", "", "", "", "", "", 404},
		{"/favicon.ico", "", "", "", "", "", 404},
		{"/assets/../index.html", "", "", "no-cache", "text/html", "<title>troupe</title>", 200},
	} {
		resp := get(h, "GET", c.path, c.enc)
		body, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Encoding") == "gzip" {
			r, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%s: bad gzip: %v", c.path, err)
			}
			body, _ = io.ReadAll(r)
		}
		if resp.StatusCode != c.code {
			t.Errorf("%s: status %d, want %d", c.path, resp.StatusCode, c.code)
			continue
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != "default-src 'self'" {
			t.Errorf("%s: CSP %q", c.path, got)
		}
		if c.code != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Encoding"); got != c.wantEnc {
			t.Errorf("%s (Accept-Encoding %q): Content-Encoding %q, want %q", c.path, c.enc, got, c.wantEnc)
		}
		if got := resp.Header.Get("Cache-Control"); !strings.Contains(got, c.wantCache) {
			t.Errorf("%s: Cache-Control %q, want %s", c.path, got, c.wantCache)
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, c.wantType) {
			t.Errorf("%s: Content-Type %q, want %s", c.path, got, c.wantType)
		}
		if !strings.Contains(string(body), c.wantBody) {
			t.Errorf("%s: body %q, want %q in it", c.path, body, c.wantBody)
		}
		if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("%s: no Vary: Accept-Encoding", c.path)
		}
	}
	if resp := get(h, "POST", "/", ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
	if resp := get(h, "HEAD", "/assets/main-ABC.js", "gzip"); resp.StatusCode != 200 || resp.ContentLength <= 0 {
		t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

// TestHandlerUnbuilt: a binary built before the npm build says what to do.
func TestHandlerUnbuilt(t *testing.T) {
	h := handler(fstest.MapFS{"README": {Data: []byte("placeholder")}})
	resp := get(h, "GET", "/", "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "make build") {
		t.Errorf("unbuilt UI: %d %q", resp.StatusCode, body)
	}
}
