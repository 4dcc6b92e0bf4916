package bus

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/troupe-dev/troupe/internal/atomicfile"
)

// Creds are what a runner needs to connect: AddRunner (the embedded
// server's or External's) mints them, WriteCreds and ReadCreds keep them
// in a file. A runner of the embedded server has a user and a secret; one
// of an existing cluster (External) a user JWT and its nkey seed instead.
type Creds struct {
	Name   string // the runner's name (CheckName)
	URL    string // nats://host:port or tls://host:port; an existing cluster's may list several, comma separated
	User   string
	Secret string // never logged: String and LogValue leave it out
	JWT    string // a user JWT (an existing cluster); then Seed, and no User or Secret
	Seed   string // the user's nkey seed (SU…); never logged
	CA     string // PEM of the certificate to trust (pinned) when TLS; empty otherwise
}

// user is who c connects as: its user, or its JWT's subject.
func (c Creds) user() string {
	if c.JWT != "" {
		if uc, err := jwt.DecodeUserClaims(c.JWT); err == nil {
			return uc.Subject
		}
		return "(a user JWT)"
	}
	return c.User
}

// String leaves the secret out.
func (c Creds) String() string {
	return fmt.Sprintf("runner %s at %s as %s (secret hidden)", c.Name, c.URL, c.user())
}

// LogValue leaves the secret out.
func (c Creds) LogValue() slog.Value {
	return slog.GroupValue(slog.String("runner", c.Name), slog.String("url", c.URL), slog.String("user", c.user()))
}

// credsFields are the "key: value" lines of a credentials file, in order:
// name and url, then user and secret, or jwt and seed.
var credsFields = []string{"name", "url", "user", "secret", "jwt", "seed"}

// WriteCreds writes c to path (mode 0600, atomically): a comment, one
// "key: value" line per field, then the pinned certificate's PEM if any.
func WriteCreds(path string, c Creds) error {
	b, err := c.Encode()
	if err != nil {
		return fmt.Errorf("write creds %s: %w", path, err)
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write creds: %w", err)
	}
	return nil
}

// Encode is the text of c's credentials file: a comment, one "key: value"
// line per field, then the pinned certificate's PEM if any.
func (c Creds) Encode() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# troupe runner credentials: keep this file secret (mode 0600).\n")
	b.WriteString("# Use: troupe runner --creds FILE\n")
	fmt.Fprintf(&b, "name: %s\nurl: %s\n", c.Name, c.URL)
	if c.JWT != "" {
		fmt.Fprintf(&b, "jwt: %s\nseed: %s\n", c.JWT, c.Seed)
	} else {
		fmt.Fprintf(&b, "user: %s\nsecret: %s\n", c.User, c.Secret)
	}
	if c.CA != "" {
		b.WriteString("# the server's certificate, pinned:\n")
		b.WriteString(strings.TrimRight(c.CA, "\n") + "\n")
	}
	return []byte(b.String()), nil
}

// ReadCreds reads a file WriteCreds wrote. It is strict: an unknown,
// repeated or missing field, a bad URL or certificate, a file others can
// read is an error that names the field and the fix.
func ReadCreds(path string) (Creds, error) {
	fail := func(format string, a ...any) (Creds, error) {
		return Creds{}, fmt.Errorf("read creds %s: "+format, append([]any{path}, a...)...)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Creds{}, fmt.Errorf("read creds: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fail("not a regular file")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fail("mode %v lets others read the secret: chmod 600 %s", fi.Mode().Perm(), path)
	}
	if fi.Size() > 64<<10 {
		return fail("%d bytes: a credentials file is a few hundred; is it the right file?", fi.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Creds{}, fmt.Errorf("read creds: %w", err)
	}
	var (
		c    Creds
		seen = map[string]bool{}
		ca   strings.Builder
		inCA bool
	)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if inCA || strings.HasPrefix(line, "-----BEGIN ") {
			inCA = true
			ca.WriteString(line + "\n")
			continue
		}
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return fail("line %d: want \"key: value\" (keys: %s) or a PEM certificate", n, strings.Join(credsFields, ", "))
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !slices.Contains(credsFields, key) {
			return fail("line %d: unknown field %q (fields: %s)", n, key, strings.Join(credsFields, ", "))
		}
		if seen[key] {
			return fail("line %d: field %q given twice: keep one", n, key)
		}
		seen[key] = true
		switch key {
		case "name":
			c.Name = val
		case "url":
			c.URL = val
		case "user":
			c.User = val
		case "secret":
			c.Secret = val
		case "jwt":
			c.JWT = val
		case "seed":
			c.Seed = val
		}
	}
	need := []string{"name", "url", "user", "secret"}
	if seen["jwt"] || seen["seed"] {
		need = []string{"name", "url", "jwt", "seed"}
	}
	for _, f := range need {
		if !seen[f] {
			return fail("field %q is missing: use the file troupe runner add wrote", f)
		}
	}
	c.CA = ca.String()
	if err := c.check(); err != nil {
		return fail("%w", err)
	}
	return c, nil
}

// check says what is wrong with c, naming the field.
func (c Creds) check() error {
	if err := CheckName(c.Name); err != nil {
		return fmt.Errorf("field name: %w", err)
	}
	if err := CheckURLs(c.URL); err != nil {
		return fmt.Errorf("field url: %w, as troupe runner add printed it", err)
	}
	if c.JWT != "" || c.Seed != "" {
		if c.User != "" || c.Secret != "" {
			return errors.New("fields user and secret with jwt and seed: keep one pair, as troupe runner add wrote it")
		}
		uc, err := jwt.DecodeUserClaims(c.JWT)
		if err != nil {
			return fmt.Errorf("field jwt: not a user JWT (%v): use the file troupe runner add wrote", err)
		}
		kp, err := nkeys.FromSeed([]byte(c.Seed))
		if err != nil {
			return errors.New("field seed: not an nkey seed: use the file troupe runner add wrote")
		}
		defer kp.Wipe()
		if pub, err := kp.PublicKey(); err != nil || pub != uc.Subject {
			return errors.New("field seed: not the seed of the jwt's user: use the file troupe runner add wrote")
		}
		return c.checkCA()
	}
	if c.User == "" {
		return errors.New("field user is empty: use the file troupe runner add wrote")
	}
	if c.Secret == "" {
		return errors.New("field secret is empty: use the file troupe runner add wrote")
	}
	return c.checkCA()
}

// CheckURLs says what is wrong with a list of servers' URLs, comma
// separated: each must be nats://host:port or tls://host:port.
func CheckURLs(list string) error {
	if strings.TrimSpace(list) == "" {
		return errors.New("no URL: give nats://host:port or tls://host:port")
	}
	for one := range strings.SplitSeq(list, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" || u.Port() == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("%q: want nats://host:port or tls://host:port (no user or path; several comma separated)", one)
		}
	}
	return nil
}

// checkCA says what is wrong with c's certificate, if it has one.
func (c Creds) checkCA() error {
	if c.CA != "" {
		if _, err := parseCA(c.CA); err != nil {
			return fmt.Errorf("the certificate: %w: use the file troupe runner add wrote", err)
		}
	}
	return nil
}

// parseCA reads every certificate of a PEM text; there must be one at
// least, and nothing else.
func parseCA(text string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(text)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM block of type %q, want CERTIFICATE", b.Type)
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("not a PEM certificate, or text after it")
	}
	return certs, nil
}

// tlsConfig is the runner side's TLS: only the certificates of c.CA are
// trusted. troupe's own self-signed certificate carries pinName, verified
// whatever host the runner dials; another (an existing cluster's CA) is
// verified against the URL's host.
func (c Creds) tlsConfig() (*tls.Config, error) {
	certs, err := parseCA(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	for _, cert := range certs {
		pool.AddCert(cert)
		if len(certs) == 1 && slices.Contains(cert.DNSNames, pinName) {
			tc.ServerName = pinName
		}
	}
	return tc, nil
}

// Dial connects runner c to the first server of c.URL it can reach, in
// the order the credentials list them (a cluster's credentials list every
// server the daemon knew of). It retries a connection that fails until ctx
// ends, but returns at once when the server refuses the
// credentials. Once connected, the connection reconnects forever, with a
// backoff from 250 ms to 10 s, and logs each disconnect and reconnect; what
// is published while disconnected waits in nats.go's reconnect buffer (8
// MB; a publish beyond it fails with nats.ErrReconnectBufExceeded). Two
// refusals of the credentials in a row (the runner was revoked) close it.
// Replies come on Inbox(c.Name). With a CA, TLS is required and only it is
// trusted.
func Dial(ctx context.Context, c Creds, log *slog.Logger, reconnected func()) (*nats.Conn, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("dial bus: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("runner", c.Name)
	auth := nats.UserInfo(c.User, c.Secret)
	if c.JWT != "" {
		auth = nats.UserJWTAndSeed(c.JWT, c.Seed)
	}
	opts := []nats.Option{
		nats.Name("troupe runner " + c.Name),
		auth,
		nats.CustomInboxPrefix(Inbox(c.Name)),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(backoff),
		nats.DontRandomize(),
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.Timeout(5 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("bus disconnected", "err", err)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("bus reconnect failed; trying the next server", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("bus reconnected", "url", nc.ConnectedUrlRedacted())
			if reconnected != nil {
				reconnected()
			}
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			log.Info("bus connection closed", "err", nc.LastError())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("bus error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("bus error", "err", err)
		}),
	}
	if c.CA != "" {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, fmt.Errorf("dial bus: %w", err)
		}
		opts = append(opts, nats.Secure(tc))
	}
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(c.URL, opts...)
		if err == nil {
			log.Info("bus connected", "url", nc.ConnectedUrlRedacted(), "servers", len(nc.Servers()))
			return nc, nil
		}
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
			return nil, fmt.Errorf("dial bus %s as %s: %w: the credentials were refused (revoked or expired? mint new ones with troupe runner add)", c.URL, c.user(), err)
		}
		log.Warn("bus connect failed; retrying", "url", c.URL, "attempt", attempt, "err", err)
		t := time.NewTimer(backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dial bus %s: %w (last: %v)", c.URL, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// backoff is the wait before reconnect attempt n (1, 2, …): doubling from
// 250 ms to 10 s, with up to a quarter more at random so that runners cut
// together do not come back together.
func backoff(n int) time.Duration {
	d := 10 * time.Second
	if n < 7 {
		d = min(d, 250*time.Millisecond<<max(n-1, 0))
	}
	return d + rand.N(d/4+1)
}
