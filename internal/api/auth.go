package api

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/atomicfile"
)

// This file holds the guards of contract C12 (Host and Origin checks
// against DNS rebinding, the bearer token) and the browser login: a one-time
// login link exchanged for a session cookie that expires when idle.

const (
	cookieName = "troupe_session"

	// DefaultSessionIdle is how long a browser login session lasts unused.
	DefaultSessionIdle = 12 * time.Hour

	// LoginLinkTTL is how long a login link may wait for its one use.
	LoginLinkTTL = 10 * time.Minute

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
//
// With a file (Options.SessionFile), the sessions outlive the daemon: the
// file holds each session's SHA-256 (never the cookie itself) and last use,
// written (mode 0600, by rename) when a session is added and at most once
// per persistEvery as sessions are used, and read when the daemon starts.
// A browser thus stays logged in across a daemon restart; its session may
// end up to persistEvery early, its last uses not yet written.
//
// Sessions are the API token's: the file's first line is a fingerprint of
// the token that minted them (tokenPrint), and a daemon started with
// another token (the token rotated: <state>/token deleted, the daemon
// restarted) drops them all and rewrites the file; so does a file without
// the line (written before it existed). The daemon reads its token once,
// at start, so a rotation takes effect, sessions and all, at the restart.
type logins struct {
	idle  time.Duration
	now   func() time.Time
	file  string // "": sessions live in memory only
	print string // tokenPrint of the API token
	log   *slog.Logger

	// mu guards the fields below.
	mu       sync.Mutex
	links    map[string]time.Time // one-time login token → when minted
	sessions map[string]time.Time // sessionKey(cookie) → last use
	saved    time.Time            // when file was last written
}

// persistEvery bounds how often using a session rewrites the session file.
const persistEvery = time.Minute

func newLogins(idle time.Duration, now func() time.Time, file, token string, log *slog.Logger) *logins {
	l := &logins{idle: idle, now: now, file: file, print: tokenPrint(token), log: log,
		links: map[string]time.Time{}, sessions: map[string]time.Time{}}
	if file != "" {
		l.load()
	}
	return l
}

// tokenPrint is what the session file keeps of the API token: a SHA-256 of
// it, apart from any other use of a hash of it by a prefix of its own.
func tokenPrint(token string) string {
	h := sha256.Sum256([]byte("troupe browser sessions\x00" + token))
	return hex.EncodeToString(h[:])
}

// tokenLine is the session file's first line.
const tokenLine = "token "

// sessionKey is what the daemon keeps of a session cookie: its SHA-256, so
// that the session file holds nothing a reader could log in with.
func sessionKey(cookie string) string {
	h := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(h[:])
}

// load reads the session file: a line "token PRINT", then lines "KEY
// UNIXNANO". A missing file is no session; a file of another token (or of
// none) is no session, and is written again at once without them; a bad
// line is skipped; expired sessions are dropped; at most maxSessions are
// read.
func (l *logins) load() {
	b, err := os.ReadFile(l.file)
	if err != nil {
		if !os.IsNotExist(err) {
			l.log.Warn("read browser sessions: browsers log in again", "file", l.file, "err", err)
		}
		return
	}
	now := l.now()
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != tokenLine+l.print {
		l.log.Info("the browser sessions were made with another API token: all dropped, browsers log in again", "file", l.file)
		l.persist(now)
		return
	}
	for sc.Scan() && len(l.sessions) < maxSessions {
		k, v, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || len(k) != 64 {
			continue
		}
		if last := time.Unix(0, n); !l.expired(last, now) {
			l.sessions[k] = last
		}
	}
}

// persist writes the session file; l.mu is held.
func (l *logins) persist(now time.Time) {
	if l.file == "" {
		return
	}
	l.saved = now
	var b bytes.Buffer
	b.WriteString(tokenLine + l.print + "\n")
	for k, last := range l.sessions {
		fmt.Fprintf(&b, "%s %d\n", k, last.UnixNano())
	}
	if err := atomicfile.Write(l.file, b.Bytes(), 0o600); err != nil {
		l.log.Warn("write browser sessions", "file", l.file, "err", err)
	}
}

// mint records a new one-time login token and returns it. Links unused
// for LoginLinkTTL are dropped first.
func (l *logins) mint() string {
	t := randomToken()
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, minted := range l.links {
		if now.Sub(minted) >= LoginLinkTTL {
			delete(l.links, id)
		}
	}
	addBounded(l.links, t, now, maxLogins)
	return t
}

// redeem uses up a one-time login token and, when it was valid (known,
// unused and minted less than LoginLinkTTL ago), returns a new session id.
func (l *logins) redeem(token string) (string, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	minted, ok := l.links[token]
	if !ok {
		return "", false
	}
	delete(l.links, token)
	if now.Sub(minted) >= LoginLinkTTL {
		return "", false
	}
	for id, last := range l.sessions {
		if l.expired(last, now) {
			delete(l.sessions, id)
		}
	}
	sess := randomToken()
	addBounded(l.sessions, sessionKey(sess), now, maxSessions)
	l.persist(now)
	return sess, true
}

// use reports whether the session id is known and not expired, and if so
// counts this as a use. An expired session is dropped.
func (l *logins) use(id string) bool {
	now := l.now()
	k := sessionKey(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.sessions[k]
	if !ok {
		return false
	}
	if l.expired(last, now) {
		delete(l.sessions, k)
		return false
	}
	l.sessions[k] = now
	if now.Sub(l.saved) >= persistEvery {
		l.persist(now)
	}
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

// SetAddr records the bound address and derives the Host values accepted
// (Origin is checked against the same list): 127.0.0.1, localhost and
// [::1] with the port; the bound address itself unless it is unspecified
// (0.0.0.0, [::]), which names no host; and Options.PublicName with the
// port, the name browsers on other machines use.
func (s *Server) SetAddr(addr string) {
	host, port, _ := net.SplitHostPort(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr = addr
	s.hosts = map[string]bool{
		net.JoinHostPort("127.0.0.1", port): true,
		net.JoinHostPort("localhost", port): true,
		net.JoinHostPort("::1", port):       true,
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		s.hosts[net.JoinHostPort(host, port)] = true
	}
	if s.o.PublicName != "" {
		s.hosts[net.JoinHostPort(s.o.PublicName, port)] = true
	}
}

// LocalAddr is the address a client on this machine dials to reach a
// daemon bound to addr: 127.0.0.1 in place of an unspecified host
// (0.0.0.0, [::] or none), addr itself otherwise.
func LocalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// browseAddr is the host:port a browser is told to open: the public name
// when there is one, else LocalAddr of the bound address; never [::].
func (s *Server) browseAddr() string {
	addr := LocalAddr(s.currentAddr())
	if s.o.PublicName == "" {
		return addr
	}
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort(s.o.PublicName, port)
}

// LoginURL mints a one-time login token and returns the URL that exchanges
// it for a browser session. The link works once, within LoginLinkTTL.
func (s *Server) LoginURL() string {
	return "http://" + s.browseAddr() + "/login?token=" + s.logins.mint()
}

// ServeHTTP applies the guards, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "forbidden", "host "+strconv.Quote(r.Host)+" is not allowed: reach the daemon at "+s.browseAddr())
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
		writeError(w, http.StatusForbidden, "forbidden", "origin "+strconv.Quote(o)+" is not allowed")
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && !s.authorize(w, r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="troupe"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", unauthorizedMessage(r))
		return
	}
	if hasNUL(r) {
		writeError(w, http.StatusBadRequest, "invalid", "the request's path or query contains a NUL byte (%00): no name or path troupe knows has one")
		return
	}
	if s.o.Version != "" {
		w.Header().Set(VersionHeader, s.o.Version)
	}
	s.mux.ServeHTTP(w, r)
}

// hasNUL reports whether the request's path or a query parameter holds a
// NUL byte, which no id, name or file path may contain (the kernel would
// refuse such a path with an error that is not the caller's to read).
func hasNUL(r *http.Request) bool {
	if strings.ContainsRune(r.URL.Path, 0) {
		return true
	}
	for k, vs := range r.URL.Query() {
		if strings.ContainsRune(k, 0) {
			return true
		}
		for _, v := range vs {
			if strings.ContainsRune(v, 0) {
				return true
			}
		}
	}
	return false
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
	return s.hosts[h]
}

func (s *Server) originAllowed(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme != "http" {
		return false
	}
	return s.hostAllowed(u.Host)
}

// authorize checks the bearer token, else the session cookie; a request
// with a valid cookie refreshes its session's last use, and the cookie's
// lifetime with it (setSession).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return subtle.ConstantTimeCompare([]byte(h[len("Bearer "):]), []byte(s.o.Token)) == 1
	}
	c, err := r.Cookie(cookieName)
	if err != nil || !s.logins.use(c.Value) {
		return false
	}
	s.setSession(w, c.Value)
	return true
}

// setSession sets the session cookie sess to last as long as its session
// may stay unused (Options.SessionIdle): Max-Age and Expires, so that it
// outlives a browser restart, set again at each use as the session's idle
// time starts again.
func (s *Server) setSession(w http.ResponseWriter, sess string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: sess, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		MaxAge: int(s.o.SessionIdle / time.Second), Expires: s.o.Now().Add(s.o.SessionIdle)})
}

// linkRefused is what a login link that does not log in says.
const linkRefused = "This login link is unknown, was already used or expired (a link works once, within 10 minutes)."

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.logins.redeem(r.URL.Query().Get("token"))
	if !ok {
		loginPage(w, "Login link refused", linkRefused)
		return
	}
	s.setSession(w, sess)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// loginPage answers a browser that is not logged in (401) with a small
// HTML page: what happened, and the command that prints a new login link.
// It holds no script and no inline style (the UI's CSP applies to it too).
func loginPage(w http.ResponseWriter, title, what string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>troupe: %[1]s</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
</head>
<body>
<h1>troupe: %[1]s</h1>
<p>%[2]s</p>
<p>For a new login link, run this on the daemon's machine and open the link it prints:</p>
<pre><code>troupe status --login</code></pre>
</body>
</html>
`, html.EscapeString(title), html.EscapeString(what))
}

func (s *Server) newLoginLink(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, LoginLink{URL: s.LoginURL()})
}

// root serves the web UI to logged-in browsers.
func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r) {
		title, what := "not logged in", "Open the login link printed by `troupe serve` to use the web UI."
		if _, err := r.Cookie(cookieName); err == nil {
			title, what = "login expired", "Your browser's login session expired or is unknown."
		}
		loginPage(w, title, what)
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
