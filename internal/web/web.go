// Package web embeds the browser UI and serves it. The UI is a TypeScript
// and Preact project in web/ at the repository root; `make web` bundles it
// with esbuild into dist/ (content-hashed assets, gzip copies beside them),
// which this package embeds. The built files are not committed: a binary
// built before the npm build serves a page saying so (dist/README keeps
// the embed valid). The UI talks to the daemon's API with the session
// cookie of the login link; it keeps no state on the server. Only
// internal/daemon imports web.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed dist
var dist embed.FS

// Built reports whether the embedded tree holds a built UI (not just the
// placeholder README).
func Built() bool {
	_, err := fs.Stat(dist, "dist/index.html")
	return err == nil
}

// Handler serves the UI: /assets/NAME-HASH.ext with a year's immutable
// cache, anything else as index.html (the UI routes in its URL fragment), but a missing file (favicon.ico) is 404,
// with no-cache. A file with a .gz copy is sent gzipped to a browser that
// accepts gzip.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return handler(sub)
}

// handler serves the built UI in files (index.html, assets/).
func handler(files fs.FS) http.Handler {
	_, err := fs.Stat(files, "index.html")
	built := err == nil
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := "index.html"
		p := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		switch {
		case strings.HasPrefix(p, "assets/"):
			name = p
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		case path.Ext(p) != "" && path.Ext(p) != ".html":
			http.NotFound(w, r) // a file we do not have (favicon.ico): not the page
			return
		default:
			h.Set("Cache-Control", "no-cache")
		}
		if name == "index.html" && !built {
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("troupe: this binary was built without its web UI: run `make build` (it runs the npm build of web/), then start the daemon again.\n"))
			return
		}
		serve(w, r, files, name)
	})
}

// serve writes one embedded file, its .gz copy when there is one and the
// request accepts gzip.
func serve(w http.ResponseWriter, r *http.Request, files fs.FS, name string) {
	h := w.Header()
	h.Set("Content-Type", contentType(name))
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		if b, err := fs.ReadFile(files, name+".gz"); err == nil {
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusOK)
			if r.Method != http.MethodHead {
				w.Write(b)
			}
			return
		}
	}
	b, err := fs.ReadFile(files, name)
	if err != nil {
		h.Del("Cache-Control")
		http.NotFound(w, r)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return "application/octet-stream"
}

// acceptsGzip reports whether the request's Accept-Encoding names gzip
// without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) != "gzip" && strings.TrimSpace(enc) != "*" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		if q == "q=0" || q == "q=0.0" || q == "q=0.00" || q == "q=0.000" {
			return false
		}
		return true
	}
	return false
}
