package bus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/troupe-dev/troupe/internal/atomicfile"
)

// RunnerExpiry is how long the credentials External mints stay valid. The
// daemon cannot revoke a user on a cluster it does not run (that takes
// the account's JWT, which the operator signs): a revoked runner's
// credentials are ignored by the daemon at once, and refused by the
// cluster once they expire. Mint them again (troupe runner add NAME on a
// runner not revoked) before then.
const RunnerExpiry = 30 * 24 * time.Hour

// ExternalOptions configure DialExternal: the flags of troupe serve
// --nats, named in every error.
type ExternalOptions struct {
	URLs string // --nats: the cluster's URLs, comma separated
	// CredsFile (--nats-creds) is the daemon's user on the cluster: a
	// standard NATS credentials file (user JWT and nkey seed, as nsc
	// writes it). Its account is the runners' too.
	CredsFile string
	// SigningKeyFile (--nats-signing-key), optional, is a seed (SA…) of
	// a signing key of that account: with it, AddRunner mints runners'
	// users. Without, AddRunner says what to do instead.
	SigningKeyFile string
	// CAFile (--nats-ca), optional, is the PEM of the CA the cluster's
	// TLS certificates chain to; it goes into the runners' credentials.
	CAFile string
	// Dir (<state>/nats) keeps the runners' registry.
	Dir    string
	Logger *slog.Logger
}

// External is the daemon's link to an existing NATS cluster: its
// connection (in its account, with the account's rights), the registry of
// the runners it minted or revoked, and the minting.
//
// Every runner is in the daemon's account, kept apart by its user's
// permissions alone (see the package doc): the daemon checks each
// message's runner against the registry (Allowed) and each request's
// reply subject (internal/remote).
type External struct {
	o       ExternalOptions
	log     *slog.Logger
	conn    *nats.Conn
	account string        // the account's public key (A…)
	signer  nkeys.KeyPair // nil without --nats-signing-key
	ca      string        // PEM, when --nats-ca
	tls     *tls.Config   // trusting ca, when --nats-ca

	// mu guards runners and serializes the writes of the registry.
	mu      sync.Mutex
	runners map[string]externalRecord
}

// externalRecord is one runner's entry in the registry: the users minted
// for it (public keys: the seeds went to the runner), until when the last
// of them is valid, and whether it is revoked.
type externalRecord struct {
	Name    string    `json:"name"`
	Users   []string  `json:"users,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"` // zero: not minted by troupe, so unknown
	Revoked time.Time `json:"revoked,omitzero"`
}

type externalFile struct {
	Runners []externalRecord `json:"runners"`
}

// externalName is the registry's file under Dir.
const externalName = "external-runners.json"

// DialExternal connects the daemon to an existing cluster and checks what
// it needs there: the credentials, JetStream for their account, and the
// signing key (a user it signs must be accepted). Each error names the
// flag and the fix. The connection reconnects forever (backoff as Dial's).
func DialExternal(ctx context.Context, o ExternalOptions) (*External, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := CheckURLs(o.URLs); err != nil {
		return nil, fmt.Errorf("--nats: %w", err)
	}
	if o.Dir == "" {
		return nil, errors.New("dial cluster: Dir is empty: give the folder for the runners' registry")
	}
	e := &External{o: o, log: log.With("component", "bus")}
	var err error
	if e.account, err = credsAccount(o.CredsFile); err != nil {
		return nil, err
	}
	if o.SigningKeyFile != "" {
		if e.signer, err = readSigningKey(o.SigningKeyFile); err != nil {
			return nil, err
		}
	}
	var tc *tls.Config
	if o.CAFile != "" {
		pemText, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-ca: %w: give the PEM file of the CA of the cluster's certificates", err)
		}
		certs, err := parseCA(string(pemText))
		if err != nil {
			return nil, fmt.Errorf("--nats-ca %s: %w: give the PEM file of the CA of the cluster's certificates", o.CAFile, err)
		}
		pool := x509.NewCertPool()
		for _, c := range certs {
			pool.AddCert(c)
		}
		tc = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		e.ca, e.tls = string(pemText), tc
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("dial cluster: %w", err)
	}
	if e.runners, err = loadExternal(filepath.Join(o.Dir, externalName)); err != nil {
		return nil, fmt.Errorf("dial cluster: %w", err)
	}
	opts := []nats.Option{
		nats.Name("troupe daemon"),
		nats.UserCredentials(o.CredsFile),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(backoff),
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.Timeout(5 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { e.log.Warn("bus disconnected", "err", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { e.log.Info("bus reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { e.log.Warn("bus error", "err", err) }),
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(o.URLs, opts...)
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return nil, fmt.Errorf("--nats-creds %s: the cluster refused them: %w: give a valid user of the account troupe uses", o.CredsFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("--nats %s: cannot reach the cluster: %w: is it up, and are the URLs right (and --nats-ca, for TLS)?", o.URLs, err)
	}
	e.conn = nc
	if err := e.check(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	if _, terr := nc.TLSConnectionState(); terr != nil {
		if u, perr := url.Parse(nc.ConnectedUrl()); perr == nil && !isLoopback(u.Hostname()) {
			// The runners' turns, MCP calls and credentials' use cross
			// it: say so loudly, once.
			e.log.Warn("the link to the NATS cluster is not TLS, beyond loopback: use tls:// URLs (and --nats-ca)", "url", nc.ConnectedUrlRedacted())
		}
	}
	e.log.Info("bus connected to a cluster", "url", nc.ConnectedUrlRedacted(), "account", e.account,
		"servers", len(nc.Servers()), "minting", e.signer != nil)
	return e, nil
}

// check asks JetStream for the account's limits, and has the cluster
// judge a user the signing key signs (denied everything, a minute long).
func (e *External) check(ctx context.Context) error {
	js, err := jetstream.New(e.conn)
	if err != nil {
		return fmt.Errorf("open jetstream: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(cctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			return fmt.Errorf("--nats-creds: account %s has no JetStream: have your NATS admin enable it for the account (nsc edit account %s --js-disk-storage 1G --js-streams -1 --js-consumer -1; nsc push)", e.account, e.account)
		}
		return fmt.Errorf("--nats: ask JetStream for account %s: %w: is JetStream up on the cluster?", e.account, err)
	}
	if e.signer == nil {
		return nil
	}
	probe, err := e.mint("troupe probe", nil, nil, time.Minute)
	if err != nil {
		return err
	}
	popts := []nats.Option{nats.Name("troupe probe"), nats.UserJWTAndSeed(probe.JWT, probe.Seed), nats.NoReconnect(), nats.Timeout(5 * time.Second)}
	if e.tls != nil {
		popts = append(popts, nats.Secure(e.tls))
	}
	pc, err := nats.Connect(e.o.URLs, popts...)
	if err != nil {
		pub, _ := e.signer.PublicKey()
		return fmt.Errorf("--nats-signing-key %s: the cluster refuses a user it signs (%w): add %s to the signing keys of account %s (nsc edit account %s --sk %s; nsc push)",
			e.o.SigningKeyFile, err, pub, e.account, e.account, pub)
	}
	pc.Close()
	return nil
}

// credsAccount is the account of the user in a standard credentials
// file: its JWT's issuer account, or its issuer.
func credsAccount(path string) (string, error) {
	fail := func(why string) (string, error) {
		return "", fmt.Errorf("--nats-creds %s: %s: give the credentials file of the daemon's user in the account troupe uses (nsc generate creds -a ACCOUNT -n troupe)", path, why)
	}
	if path == "" {
		return "", errors.New("--nats-creds: missing: give the credentials file (user JWT and nkey seed, as nsc writes it) of the daemon's user in the account troupe uses")
	}
	if err := private(path, "--nats-creds"); err != nil {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(err.Error())
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	var uc *jwt.UserClaims
	if err == nil {
		uc, err = jwt.DecodeUserClaims(tok)
	}
	if err != nil {
		return fail("no user JWT in it")
	}
	if _, err := jwt.ParseDecoratedUserNKey(data); err != nil {
		return fail("no user seed in it")
	}
	if uc.IssuerAccount != "" {
		return uc.IssuerAccount, nil
	}
	return uc.Issuer, nil
}

// readSigningKey reads an account's seed (SA…), alone or decorated.
func readSigningKey(path string) (nkeys.KeyPair, error) {
	if err := private(path, "--nats-signing-key"); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--nats-signing-key: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err == nil {
		var seed []byte
		if seed, err = kp.Seed(); err == nil {
			kp, err = nkeys.FromSeed(seed)
		}
	}
	if err != nil || !strings.HasPrefix(string(mustPub(kp)), "A") {
		return nil, fmt.Errorf("--nats-signing-key %s: not the seed of an account's key (SA…): give the seed of a signing key of the daemon's account (nsc edit account --sk generate prints its public key; its seed is in nsc's keys folder)", path)
	}
	return kp, nil
}

// private refuses a secret's file (flag's) that others may read.
func private(path, flag string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s %s: mode %v lets others read a secret: chmod 600 %s", flag, path, fi.Mode().Perm(), path)
	}
	return nil
}

func mustPub(kp nkeys.KeyPair) string {
	if kp == nil {
		return ""
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return ""
	}
	return pub
}

// RunnerPermissions are what a runner's user may do on a cluster, as
// AddRunner mints them and as a NATS admin gives them: publish, subscribe,
// and whether it may answer requests.
func RunnerPermissions(name string) (pub, sub []string) {
	return []string{FromRunner(name) + ".>"}, []string{ToRunner(name) + ".>", Inbox(name) + ".>"}
}

// mint signs a new user: pub and sub its allowed subjects (nil: none at
// all), answering one message per request received when pub is not nil.
func (e *External) mint(name string, pub, sub []string, ttl time.Duration) (Creds, error) {
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return Creds{}, fmt.Errorf("make user key: %w", err)
	}
	upub, _ := ukp.PublicKey()
	seed, err := ukp.Seed()
	if err != nil {
		return Creds{}, fmt.Errorf("make user key: %w", err)
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	if mustPub(e.signer) != e.account {
		uc.IssuerAccount = e.account
	}
	if pub == nil {
		uc.Pub.Deny.Add(">")
		uc.Sub.Deny.Add(">")
	} else {
		uc.Pub.Allow.Add(pub...)
		uc.Sub.Allow.Add(sub...)
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: responseWindow}
	}
	uc.Expires = time.Now().Add(ttl).Unix()
	tok, err := uc.Encode(e.signer)
	if err != nil {
		return Creds{}, fmt.Errorf("sign user: %w", err)
	}
	return Creds{URL: e.clusterURLs(), JWT: tok, Seed: string(seed), CA: e.ca}, nil
}

// clusterURLs are the URLs a runner's credentials carry: those --nats gave,
// then the servers of the cluster the daemon's connection has heard of, so
// that a runner reaches the cluster while the one server it was told of is
// down, at its start as at a reconnect, without depending on the list the
// server it happens to be on gossips at that moment.
func (e *External) clusterURLs() string {
	var urls []string
	for one := range strings.SplitSeq(e.o.URLs, ",") {
		if one = strings.TrimSpace(one); one != "" && !slices.Contains(urls, one) {
			urls = append(urls, one)
		}
	}
	if e.conn == nil {
		return strings.Join(urls, ",")
	}
	for _, one := range e.conn.DiscoveredServers() {
		if !slices.Contains(urls, one) {
			urls = append(urls, one)
		}
	}
	return strings.Join(urls, ",")
}

// AddRunner mints runner name's credentials: a new user in the daemon's
// account, signed by the signing key, allowed only the runner's subjects
// (RunnerPermissions) and valid RunnerExpiry. A runner not revoked gets
// new credentials (its old ones stay valid until they expire); a revoked
// one is refused while its old ones are valid on the cluster.
func (e *External) AddRunner(name string) (Creds, error) {
	if err := CheckName(name); err != nil {
		return Creds{}, fmt.Errorf("add runner: %w", err)
	}
	if e.signer == nil {
		pub, sub := RunnerPermissions(name)
		return Creds{}, fmt.Errorf("add runner %s: this daemon cannot mint users on the cluster: restart troupe serve with --nats-signing-key FILE (the seed of a signing key of account %s), "+
			"or have your NATS admin create a user for it in that account with publish allow %s, subscribe allow %s, allow responses (max 1), and write the runner's file as: name: %s, url: %s, jwt: <its JWT>, seed: <its seed>",
			name, e.account, strings.Join(pub, ", "), strings.Join(sub, ", "), name, e.o.URLs)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now().UTC()
	r, ok := e.runners[name]
	if ok && !r.Revoked.IsZero() {
		if r.Expires.IsZero() {
			return Creds{}, fmt.Errorf("add runner %s: it was revoked, and troupe cannot tell when its credentials end on the cluster (it did not mint them): pick another name", name)
		}
		if now.Before(r.Expires) {
			return Creds{}, fmt.Errorf("add runner %s: it was revoked, and its old credentials stay valid on the cluster until %s (this daemon ignores them, but would listen to them again): pick another name, or wait until then",
				name, r.Expires.Format(time.RFC3339))
		}
		ok = false
	}
	if !ok {
		r = externalRecord{Name: name, Created: now}
	}
	pub, sub := RunnerPermissions(name)
	c, err := e.mint("troupe runner "+name, pub, sub, RunnerExpiry)
	if err != nil {
		return Creds{}, fmt.Errorf("add runner %s: %w", name, err)
	}
	c.Name = name
	uc, _ := jwt.DecodeUserClaims(c.JWT)
	r.Users = append(slices.Clone(r.Users), uc.Subject)
	r.Expires = time.Unix(uc.Expires, 0).UTC()
	next := maps.Clone(e.runners)
	next[name] = r
	if err := saveExternal(filepath.Join(e.o.Dir, externalName), next); err != nil {
		return Creds{}, fmt.Errorf("add runner %s: %w", name, err)
	}
	e.runners = next
	e.log.Info("runner added", "runner", name, "user", uc.Subject, "expires", r.Expires)
	return c, nil
}

// RevokeRunner marks runner name revoked: Allowed says no from then on.
// Its users stay valid on the cluster until they expire (see
// RunnerExpiry); the daemon's side drops the runner (remote.Daemon.Drop).
// A runner troupe did not mint (its user made by a NATS admin) can be
// revoked too.
func (e *External) RevokeRunner(name string) error {
	if err := CheckName(name); err != nil {
		return fmt.Errorf("revoke runner: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.runners[name]
	if ok && !r.Revoked.IsZero() {
		return fmt.Errorf("revoke runner %s: it is revoked already", name)
	}
	if !ok {
		r = externalRecord{Name: name, Created: time.Now().UTC()}
	}
	r.Revoked = time.Now().UTC()
	next := maps.Clone(e.runners)
	next[name] = r
	if err := saveExternal(filepath.Join(e.o.Dir, externalName), next); err != nil {
		return fmt.Errorf("revoke runner %s: %w", name, err)
	}
	e.runners = next
	e.log.Info("runner revoked", "runner", name, "valid on the cluster until", r.Expires)
	return nil
}

// Allowed says whether the daemon listens to runner name: not revoked.
// (On a cluster the daemon does not run, a user a NATS admin made for a
// runner is in no registry: the account's permissions vouch for it.)
func (e *External) Allowed(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.runners[name]
	return !ok || r.Revoked.IsZero()
}

// Runners are the names of the runners minted and not revoked, sorted.
func (e *External) Runners() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for name, r := range e.runners {
		if r.Revoked.IsZero() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Replicas is how many copies of a runner's stream to ask the cluster
// for: 3 when the daemon is connected to a cluster (one server can be
// lost), else 1. Whether the cluster can place three is JetStream's to
// say (TooFewPeers), not the servers this connection happens to have
// heard of: those come asynchronously, after the connection.
func (e *External) Replicas() int {
	if e.conn.ConnectedClusterName() != "" {
		return 3
	}
	return 1
}

// Conn is the daemon's connection, in the runners' account.
func (e *External) Conn() *nats.Conn { return e.conn }

// URL is the cluster's URLs, as the runners' credentials carry them.
func (e *External) URL() string {
	var hosts []string
	for one := range strings.SplitSeq(e.o.URLs, ",") {
		if u, err := url.Parse(strings.TrimSpace(one)); err == nil {
			hosts = append(hosts, u.Redacted())
		}
	}
	return strings.Join(hosts, ",")
}

// Close closes the daemon's connection.
func (e *External) Close() error {
	e.conn.Close()
	return nil
}

func loadExternal(path string) (map[string]externalRecord, error) {
	m := map[string]externalRecord{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read runners' registry: %w", err)
	}
	var f externalFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("read runners' registry %s: %w: fix the file (removing it forgets which runners were revoked)", path, err)
	}
	for _, r := range f.Runners {
		if err := CheckName(r.Name); err != nil {
			return nil, fmt.Errorf("read runners' registry %s: %w", path, err)
		}
		m[r.Name] = r
	}
	return m, nil
}

func saveExternal(path string, m map[string]externalRecord) error {
	f := externalFile{Runners: []externalRecord{}}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		f.Runners = append(f.Runners, m[name])
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write runners' registry: %w", err)
	}
	return nil
}
