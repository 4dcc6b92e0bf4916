package bus

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/troupe-dev/troupe/internal/atomicfile"
)

// ServerOptions configure Start.
type ServerOptions struct {
	// Dir holds the JetStream store, the runners' accounts (runners.json)
	// and the TLS key and certificate; made 0700. Required.
	Dir string
	// Addr is where runners connect, host:port ("127.0.0.1:7434"; port 0
	// picks a free one). Required.
	Addr string
	// TLS forces TLS; it is on anyway when Addr's host is not loopback.
	TLS bool
	// Logger gets the server's notices, warnings and errors; nil discards.
	Logger *slog.Logger
}

// Server is the embedded NATS server of the daemon.
type Server struct {
	dir      string
	log      *slog.Logger
	tls      bool
	certPEM  string // the self-signed certificate runners pin, when tls
	host     string // Addr's host as given
	srv      *server.Server
	conn     *nats.Conn
	daemonPW string // the daemon's in-process password: random per start, in memory only

	// mu guards runners and accounts, and serializes the writes of
	// runners.json. The server's authentication (check) takes it.
	mu       sync.Mutex
	runners  map[string]runnerRecord
	accounts map[string]*server.Account // runner name → its wired account; kept after a revocation
}

// runnerRecord is one runner's account as runners.json keeps it: the
// bcrypt hash of its secret, never the secret.
type runnerRecord struct {
	Name    string    `json:"name"`
	Hash    string    `json:"bcrypt"`
	Created time.Time `json:"created"`
}

type runnersFile struct {
	Runners []runnerRecord `json:"runners"`
}

const (
	runnersName = "runners.json"
	certName    = "tls-cert.pem"
	keyName     = "tls-key.pem"
	// pinName is the DNS name troupe's self-signed certificate carries and
	// Dial verifies, whatever host a runner reaches the server by: the
	// certificate itself is pinned, so the name proves nothing more.
	pinName = "troupe-nats"
	// daemonUser is the daemon's own in-process user; '_' keeps it out of
	// the runners' names.
	daemonUser = "_daemon"
	// responseWindow is how long a request between the daemon and a
	// runner waits for its one answer; later, the answer is dropped.
	// An ask waits up to its ceiling (4 h by default), a permission
	// request on the person: a day.
	responseWindow = 24 * time.Hour
	// bcryptCost: the secret is 256 random bits, so stretching adds no
	// strength; every connection checks it, so it is kept cheap.
	bcryptCost = bcrypt.MinCost
)

// Start starts the server: JetStream on with every write fsync'd
// (SyncAlways: an acknowledged message survives a crash), its store under
// Dir, authentication on, listening on Addr (TLS when forced or when
// Addr's host is not loopback). It returns when the server accepts
// connections, with the daemon's in-process connection open.
func Start(o ServerOptions) (*Server, error) {
	if o.Dir == "" {
		return nil, errors.New("start bus: Dir is empty: give the folder for its store")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, portS, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("start bus: address %q: give host:port, for example 127.0.0.1:7434: %w", o.Addr, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("start bus: address %q: the port must be a number from 0 to 65535", o.Addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start bus: %w", err)
	}
	if err := os.Chmod(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start bus: %w", err)
	}
	s := &Server{
		dir:      o.Dir,
		log:      log,
		tls:      o.TLS || !isLoopback(host),
		host:     host,
		accounts: map[string]*server.Account{},
	}
	if s.runners, err = loadRunners(filepath.Join(o.Dir, runnersName)); err != nil {
		return nil, fmt.Errorf("start bus: %w", err)
	}
	if s.daemonPW, err = randomSecret(); err != nil {
		return nil, fmt.Errorf("start bus: %w", err)
	}
	opts := &server.Options{
		ServerName:                 "troupe",
		Host:                       cmp.Or(host, "0.0.0.0"),
		Port:                       port,
		NoSigs:                     true,
		JetStream:                  true,
		StoreDir:                   filepath.Join(o.Dir, "jetstream"),
		SyncAlways:                 true,
		PingInterval:               15 * time.Second,
		MaxPingsOut:                3,
		CustomClientAuthentication: authenticator{s},
		MaxPayload:                 MaxPayload,
	}
	if s.tls {
		tc, certPEM, err := loadOrMakeCert(o.Dir, host)
		if err != nil {
			return nil, fmt.Errorf("start bus: %w", err)
		}
		s.certPEM = certPEM
		opts.TLS = true
		opts.TLSConfig = tc
		opts.TLSTimeout = 5
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start bus: %w", err)
	}
	s.srv = srv
	srv.SetLogger(slogAdapter{log}, false, false)
	// Runners that connect before their accounts are wired wait for mu.
	// The accounts are registered after the start: JetStream is enabled
	// for the global (daemon's) account only while it is the only one.
	s.mu.Lock()
	srv.Start()
	ready := srv.ReadyForConnections(10 * time.Second)
	if ready {
		for _, name := range slices.Sorted(maps.Keys(s.runners)) {
			if _, err = s.wire(name); err != nil {
				break
			}
		}
	}
	s.mu.Unlock()
	if !ready || err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		if err != nil {
			return nil, fmt.Errorf("start bus: %w", err)
		}
		return nil, fmt.Errorf("start bus on %s: not ready after 10 s (is the port taken? see the log)", o.Addr)
	}
	s.conn, err = nats.Connect("", nats.InProcessServer(srv), nats.UserInfo(daemonUser, s.daemonPW),
		nats.Name("troupe daemon"), nats.NoReconnect())
	if err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("start bus: connect the daemon: %w", err)
	}
	log.Info("bus started", "url", s.URL(), "tls", s.tls, "runners", len(s.runners))
	return s, nil
}

// accountName is the NATS account of runner name.
func accountName(name string) string { return "runner-" + name }

// wire registers runner name's account, once: its own subject space,
// joined to the daemon's (global) account by two services, each limited to
// the other account. What the runner publishes on FromRunner(name) reaches
// the daemon's account; what the daemon publishes on ToRunner(name)
// reaches the runner's. A request's one answer goes back through the
// service to the asker's reply subject in the asker's account: a reply
// subject a runner names can only ever be in its own account, so it cannot
// make the daemon or the JetStream stream publish on another runner's
// subjects or on the daemon's. Caller holds mu.
func (s *Server) wire(name string) (*server.Account, error) {
	if acc := s.accounts[name]; acc != nil {
		return acc, nil
	}
	g := s.srv.GlobalAccount()
	acc, err := s.srv.RegisterAccount(accountName(name))
	if err != nil {
		return nil, fmt.Errorf("register account of runner %s: %w", name, err)
	}
	from, to := FromRunner(name)+".>", ToRunner(name)+".>"
	for _, step := range []func() error{
		func() error { return g.AddServiceExportWithResponse(from, server.Singleton, []*server.Account{acc}) },
		func() error { return g.SetServiceExportResponseThreshold(from, responseWindow) },
		func() error { return acc.AddServiceImport(g, from, "") },
		func() error { return acc.AddServiceExportWithResponse(to, server.Singleton, []*server.Account{g}) },
		func() error { return acc.SetServiceExportResponseThreshold(to, responseWindow) },
		func() error { return g.AddServiceImport(acc, to, "") },
	} {
		if err := step(); err != nil {
			return nil, fmt.Errorf("wire account of runner %s: %w", name, err)
		}
	}
	s.accounts[name] = acc
	return acc, nil
}

// runnerUser is the security boundary: what runner name may do, in its
// own account.
func runnerUser(name string, acc *server.Account) *server.User {
	return &server.User{
		Username: name,
		Account:  acc,
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{FromRunner(name) + ".>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{ToRunner(name) + ".>", Inbox(name) + ".>"}},
			Response:  &server.ResponsePermission{MaxMsgs: 1, Expires: responseWindow},
		},
	}
}

// authenticator is the server's authentication: the daemon's user over
// the in-process pipe only, with its per-start password; a runner's over
// the network only, with the secret whose bcrypt hash runners.json keeps.
type authenticator struct{ s *Server }

func (a authenticator) Check(c server.ClientAuthentication) bool {
	s := a.s
	if c.Kind() != server.CLIENT {
		return false
	}
	o := c.GetOpts()
	addr := c.RemoteAddress()
	inProcess := addr != nil && addr.Network() == "pipe"
	if o.Username == daemonUser {
		if !inProcess || subtle.ConstantTimeCompare([]byte(o.Password), []byte(s.daemonPW)) != 1 {
			return false
		}
		c.RegisterUser(&server.User{Username: daemonUser, Account: s.srv.GlobalAccount()})
		return true
	}
	if inProcess || o.Username == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runners[o.Username]
	acc := s.accounts[o.Username]
	if !ok || acc == nil || bcrypt.CompareHashAndPassword([]byte(r.Hash), []byte(o.Password)) != nil {
		return false
	}
	c.RegisterUser(runnerUser(r.Name, acc))
	return true
}

// Conn is the daemon's own in-process connection, with every right, in
// the global account. Close closes it.
func (s *Server) Conn() *nats.Conn { return s.conn }

// URL is what a runner dials: nats://host:port, or tls://host:port when TLS
// is on. A wildcard host (empty, 0.0.0.0, ::) is replaced by this machine's
// host name.
func (s *Server) URL() string {
	port := 0
	if a, ok := s.srv.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	host := s.host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "localhost"
		}
	}
	scheme := "nats"
	if s.tls {
		scheme = "tls"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// AddRunner mints the credentials of a new runner: a random secret, of
// which only the bcrypt hash is kept (Dir/runners.json); it can connect at
// once. A name that exists is refused: revoke it first.
func (s *Server) AddRunner(name string) (Creds, error) {
	if err := CheckName(name); err != nil {
		return Creds{}, fmt.Errorf("add runner: %w", err)
	}
	secret, err := randomSecret()
	if err != nil {
		return Creds{}, fmt.Errorf("add runner %s: %w", name, err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(secret), bcryptCost)
	if err != nil {
		return Creds{}, fmt.Errorf("add runner %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.runners[name]; ok {
		return Creds{}, fmt.Errorf("add runner %s: it exists: revoke it first (troupe runner revoke %s), then add it again", name, name)
	}
	if _, err := s.wire(name); err != nil {
		return Creds{}, fmt.Errorf("add runner %s: %w", name, err)
	}
	next := maps.Clone(s.runners)
	next[name] = runnerRecord{Name: name, Hash: string(hash), Created: time.Now().UTC()}
	if err := saveRunners(filepath.Join(s.dir, runnersName), next); err != nil {
		return Creds{}, fmt.Errorf("add runner %s: %w", name, err)
	}
	s.runners = next
	s.log.Info("runner added", "runner", name)
	c := Creds{Name: name, URL: s.URL(), User: name, Secret: secret}
	if s.tls {
		c.CA = s.certPEM
	}
	return c, nil
}

// RevokeRunner removes runner name's account: its credentials are refused
// from then on and its live connections are closed before it returns.
func (s *Server) RevokeRunner(name string) error {
	s.mu.Lock()
	if _, ok := s.runners[name]; !ok {
		s.mu.Unlock()
		return fmt.Errorf("revoke runner %s: no such runner (troupe runners lists them)", name)
	}
	next := maps.Clone(s.runners)
	delete(next, name)
	if err := saveRunners(filepath.Join(s.dir, runnersName), next); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("revoke runner %s: %w", name, err)
	}
	s.runners = next
	s.mu.Unlock()
	// A connection that passed the check before the removal is bound to
	// the runner's account by then: closing the account's connections
	// catches it. (Not under mu: the check takes it.)
	cz, err := s.srv.Connz(&server.ConnzOptions{Account: accountName(name), Limit: 1 << 20})
	if err != nil {
		return fmt.Errorf("revoke runner %s: list its connections: %w", name, err)
	}
	for _, ci := range cz.Conns {
		if err := s.srv.DisconnectClientByID(ci.Cid); err != nil {
			return fmt.Errorf("revoke runner %s: close connection %d: %w", name, ci.Cid, err)
		}
	}
	s.log.Info("runner revoked", "runner", name, "closed", len(cz.Conns))
	return nil
}

// Runners are the names of the runners' accounts, sorted.
func (s *Server) Runners() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.runners))
}

// Close closes the daemon's connection, shuts the server down and waits for
// it.
func (s *Server) Close() error {
	s.conn.Close()
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	return nil
}

func loadRunners(path string) (map[string]runnerRecord, error) {
	m := map[string]runnerRecord{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read runners: %w", err)
	}
	var f runnersFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("read runners %s: %w: fix or remove the file (every runner must then be added again)", path, err)
	}
	for _, r := range f.Runners {
		if err := CheckName(r.Name); err != nil {
			return nil, fmt.Errorf("read runners %s: %w", path, err)
		}
		if _, err := bcrypt.Cost([]byte(r.Hash)); err != nil {
			return nil, fmt.Errorf("read runners %s: runner %s: bcrypt hash: %w: revoke and add it again", path, r.Name, err)
		}
		m[r.Name] = r
	}
	return m, nil
}

func saveRunners(path string, m map[string]runnerRecord) error {
	f := runnersFile{Runners: []runnerRecord{}}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		f.Runners = append(f.Runners, m[name])
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write runners: %w", err)
	}
	return nil
}

// randomSecret is 256 random bits, URL-safe base64.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loadOrMakeCert reads the server's key and self-signed certificate from
// dir, making them on first use (ECDSA P-256, ten years).
func loadOrMakeCert(dir, host string) (*tls.Config, string, error) {
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
		certPEM, keyPEM, err1 = makeCert(host)
		if err1 != nil {
			return nil, "", err1
		}
		if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
			return nil, "", fmt.Errorf("write tls key: %w", err)
		}
		if err := atomicfile.Write(certPath, certPEM, 0o600); err != nil {
			return nil, "", fmt.Errorf("write tls certificate: %w", err)
		}
	} else if err := cmp.Or(err1, err2); err != nil {
		return nil, "", fmt.Errorf("read tls key and certificate: %w (remove both %s and %s to make new ones; every runner must then be added again)", err, certName, keyName)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, "", fmt.Errorf("load tls key and certificate: %w (remove both %s and %s to make new ones; every runner must then be added again)", err, certName, keyName)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}, string(certPEM), nil
}

func makeCert(host string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make tls key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("make tls certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: pinName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{pinName, "localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if ip == nil && host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("make tls certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("make tls key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// slogAdapter is the server's logger. Debug and trace are off (Start says
// so to the server): traces would carry message bodies.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Noticef(f string, v ...any) { a.log.Debug("nats: " + fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.log.Warn("nats: " + fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any)  { a.log.Error("nats: " + fmt.Sprintf(f, v...)) }
func (a slogAdapter) Errorf(f string, v ...any)  { a.log.Error("nats: " + fmt.Sprintf(f, v...)) }
func (a slogAdapter) Debugf(f string, v ...any)  { a.log.Debug("nats: " + fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any)  {}
