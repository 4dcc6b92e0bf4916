package api

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the guards of contract C12 (Host and Origin checks
// against DNS rebinding, the bearer token) and the browser login: a one-time
// login link exchanged for a session cookie that expires when idle.

const (
	cookieName = "troupe_session"

	// DefaultSessionIdle is how long a browser login session lasts unused.
	DefaultSessionIdle = 12 * time.Hour

	// maxSessions bounds the browser sessions held, and maxLogins the
	// one-time login links not yet used: both are minted on request by
	// anyone who holds the token. Past the bound the least recently used
	// entry is dropped (that browser logs in again; that link is refused).
	maxSessions = 1000
	maxLogins   = 1000
)

// LoginLink is the answer of POST /api/login-links.
type LoginLink struct {
	URL string `json:"url"`
}

// logins holds the one-time login tokens and the browser sessions. Expired
// sessions are dropped lazily, when looked up and when a session is added;
// no goroutine sweeps them.
type logins struct {
	idle time.Duration
	now  func() time.Time

	// mu guards links and sessions.
	mu       sync.Mutex
	links    map[string]time.Time // one-time login token → when minted
	sessions map[string]time.Time // session cookie → last use
}

func newLogins(idle time.Duration, now func() time.Time) *logins {
	return &logins{idle: idle, now: now, links: map[string]time.Time{}, sessions: map[string]time.Time{}}
}

// mint records a new one-time login token and returns it.
func (l *logins) mint() string {
	t := randomToken()
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	addBounded(l.links, t, now, maxLogins)
	return t
}

// redeem uses up a one-time login token and, when it was valid, returns a
// new session id.
func (l *logins) redeem(token string) (string, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.links[token]; !ok {
		return "", false
	}
	delete(l.links, token)
	for id, last := range l.sessions {
		if l.expired(last, now) {
			delete(l.sessions, id)
		}
	}
	sess := randomToken()
	addBounded(l.sessions, sess, now, maxSessions)
	return sess, true
}

// use reports whether the session id is known and not expired, and if so
// counts this as a use. An expired session is dropped.
func (l *logins) use(id string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.sessions[id]
	if !ok {
		return false
	}
	if l.expired(last, now) {
		delete(l.sessions, id)
		return false
	}
	l.sessions[id] = now
	return true
}

func (l *logins) expired(last, now time.Time) bool { return now.Sub(last) >= l.idle }

// addBounded sets m[k] = t, first dropping the entry with the oldest time
// when m holds max entries already. The scan is linear; max is small.
func addBounded(m map[string]time.Time, k string, t time.Time, max int) {
	for len(m) >= max {
		var oldest string
		var ot time.Time
		for id, used := range m {
			if oldest == "" || used.Before(ot) {
				oldest, ot = id, used
			}
		}
		delete(m, oldest)
	}
	m[k] = t
}

// SetAddr records the bound address and derives the Host values accepted.
// A loopback address accepts 127.0.0.1, localhost and [::1] with its port;
// another address also accepts itself; an unspecified address (0.0.0.0)
// accepts any Host, since it cannot know the names it is reached by.
func (s *Server) SetAddr(addr string) {
	host, port, _ := net.SplitHostPort(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr = addr
	ip := net.ParseIP(host)
	if ip != nil && ip.IsUnspecified() {
		s.hosts = nil
		return
	}
	s.hosts = map[string]bool{
		net.JoinHostPort("127.0.0.1", port): true,
		net.JoinHostPort("localhost", port): true,
		net.JoinHostPort("::1", port):       true,
		net.JoinHostPort(host, port):        true,
	}
}

// LoginURL mints a one-time login token and returns the URL that exchanges
// it for a browser session.
func (s *Server) LoginURL() string {
	return "http://" + s.currentAddr() + "/login?token=" + s.logins.mint()
}

// ServeHTTP applies the guards, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "forbidden", "host "+strconv.Quote(r.Host)+" is not allowed: reach the daemon at "+s.currentAddr())
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
		writeError(w, http.StatusForbidden, "forbidden", "origin "+strconv.Quote(o)+" is not allowed")
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="troupe"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", unauthorizedMessage(r))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// sessionGone answers a browser whose session cookie is unknown or expired
// (the two are not told apart).
const sessionGone = "your browser's login session expired or is unknown: run `troupe status --login` for a new login link"

// unauthorizedMessage says what to do.
func unauthorizedMessage(r *http.Request) string {
	if _, err := r.Cookie(cookieName); err == nil && r.Header.Get("Authorization") == "" {
		return sessionGone
	}
	return "missing or wrong token: the CLI reads it from <state-dir>/token; browsers use the login link printed by `troupe serve`"
}

func (s *Server) currentAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

func (s *Server) hostAllowed(h string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosts == nil || s.hosts[h]
}

func (s *Server) originAllowed(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme != "http" {
		return false
	}
	return s.hostAllowed(u.Host)
}

// authorized checks the bearer token, else the session cookie; a request
// with a valid cookie refreshes its session's last use.
func (s *Server) authorized(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return subtle.ConstantTimeCompare([]byte(h[len("Bearer "):]), []byte(s.o.Token)) == 1
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return false
	}
	return s.logins.use(c.Value)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.logins.redeem(r.URL.Query().Get("token"))
	if !ok {
		writeError(w, http.StatusUnauthorized, "unauthorized", "this login link is unknown or was already used: run `troupe status --login` for a new one")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: sess, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) newLoginLink(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, LoginLink{URL: s.LoginURL()})
}

// root serves the web UI to logged-in browsers.
func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		msg := "open the login link printed by `troupe serve` (or run `troupe status --login`)"
		if _, err := r.Cookie(cookieName); err == nil {
			msg = sessionGone
		}
		fmt.Fprintln(w, "troupe: "+msg+".")
		return
	}
	if s.o.Web == nil {
		http.NotFound(w, r)
		return
	}
	s.o.Web.ServeHTTP(w, r)
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}
