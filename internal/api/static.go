package api

import "net/http"

// favicon is troupe's icon: three masks on a dark disc, drawn for troupe.
// It is served without auth (a browser asks for it before any login) at
// /favicon.svg, which the UI's page and the login page link, and at
// /favicon.ico, which browsers ask for on their own.
const favicon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<circle cx="16" cy="16" r="15" fill="#1f2430"/>
<circle cx="9" cy="17" r="5" fill="#e8b04b"/>
<circle cx="16" cy="12" r="5" fill="#6cc3a0"/>
<circle cx="23" cy="17" r="5" fill="#d9687a"/>
<path d="M7 17h1.5M10 17h1.5M14 12h1.5M17 12h1.5M21 17h1.5M24 17h1.5" stroke="#1f2430" stroke-width="1.4" stroke-linecap="round"/>
</svg>
`

// routeStatic serves the few files every browser may fetch unauthenticated.
func (s *Server) routeStatic() {
	s.mux.HandleFunc("GET /favicon.ico", ServeFavicon)
	s.mux.HandleFunc("GET /favicon.svg", ServeFavicon)
}

// ServeFavicon answers the icon (tests serving the UI without a daemon
// mount it too).
func ServeFavicon(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Content-Security-Policy", "default-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=86400")
	w.Write([]byte(favicon))
}
