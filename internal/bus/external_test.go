package bus

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// cluster is a NATS server in operator (JWT) mode, as an admin runs one:
// an account for troupe with a signing key, another without JetStream.
type cluster struct {
	url                 string
	creds, noJS         string // the daemon's user of each account: credentials files
	signing, otherAccSK string // seeds: the account's signing key; another account's key
}

func newKey(t *testing.T, f func() (nkeys.KeyPair, error)) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := f()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return kp, pub
}

func seedOf(t *testing.T, kp nkeys.KeyPair) string {
	s, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(s)
}

func startOperatorServer(t *testing.T) cluster {
	t.Helper()
	dir := t.TempDir()
	okp, opub := newKey(t, nkeys.CreateOperator)
	oc := jwt.NewOperatorClaims(opub)
	if _, err := oc.Encode(okp); err != nil {
		t.Fatal(err)
	}
	res := &server.MemAccResolver{}
	account := func(js bool, signing string) (nkeys.KeyPair, string) {
		akp, apub := newKey(t, nkeys.CreateAccount)
		ac := jwt.NewAccountClaims(apub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: 1 << 30, Streams: -1, Consumer: -1}
		}
		if signing != "" {
			ac.SigningKeys.Add(signing)
		}
		tok, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		res.Store(apub, tok)
		return akp, apub
	}
	user := func(akp nkeys.KeyPair, file string) string {
		ukp, upub := newKey(t, nkeys.CreateUser)
		tok, err := jwt.NewUserClaims(upub).Encode(akp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(tok, []byte(seedOf(t, ukp)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	skp, spub := newKey(t, nkeys.CreateAccount)
	_, sysPub := account(false, "")
	akp, _ := account(true, spub)
	bkp, _ := account(false, "")
	c := cluster{creds: user(akp, "troupe.creds"), noJS: user(bkp, "nojs.creds"), signing: filepath.Join(dir, "sk.nk"), otherAccSK: filepath.Join(dir, "other.nk")}
	os.WriteFile(c.signing, []byte(seedOf(t, skp)+"\n"), 0o600)
	os.WriteFile(c.otherAccSK, []byte(seedOf(t, bkp)+"\n"), 0o600)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: filepath.Join(dir, "js"), TrustedOperators: []*jwt.OperatorClaims{oc},
		SystemAccount: sysPub, AccountResolver: res})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	c.url = srv.ClientURL()
	return c
}

// TestExternalMint: on a cluster troupe does not run, the daemon mints a
// runner's user with the account's signing key; the runner connects with
// the file it is given and can speak and hear on its own subjects only;
// a revoked runner is not allowed, nor added again while its old user is
// valid; without a signing key, adding says what to do.
func TestExternalMint(t *testing.T) {
	c := startOperatorServer(t)
	ctx := context.Background()
	e, err := DialExternal(ctx, ExternalOptions{URLs: c.url, CredsFile: c.creds, SigningKeyFile: c.signing, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n := e.Replicas(); n != 1 {
		t.Errorf("replicas on one server: %d, want 1", n)
	}
	cr, err := e.AddRunner("r1")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r1.creds")
	if err := WriteCreds(path, cr); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCreds(path)
	if err != nil || got != cr {
		t.Fatalf("creds through their file: %+v, %v; want %+v", got, err, cr)
	}
	if strings.Contains(got.String(), got.Seed) || strings.Contains(got.String(), got.JWT) {
		t.Errorf("String shows the secrets: %s", got)
	}
	uc, err := jwt.DecodeUserClaims(cr.JWT)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(time.Unix(uc.Expires, 0)); d < RunnerExpiry-time.Hour || d > RunnerExpiry {
		t.Errorf("the runner's user expires in %v, want %v", d, RunnerExpiry)
	}
	rc, err := Dial(ctx, got, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dc := e.Conn()
	// What r1 sends reaches the daemon on r1's subjects only.
	fromR1, _ := dc.SubscribeSync(FromRunner("r1") + ".>")
	fromR2, _ := dc.SubscribeSync(FromRunner("r2") + ".>")
	jsAPI, _ := dc.SubscribeSync("$JS.API.>")
	dc.Flush()
	for _, s := range []string{FromRunner("r2") + ".hello", "$JS.API.STREAM.LIST", FromRunner("r1") + ".hello"} {
		rc.Publish(s, []byte("x"))
	}
	// What the daemon sends r2 does not reach r1.
	toR1, _ := rc.SubscribeSync(ToRunner("r1") + ".>")
	toR2, _ := rc.SubscribeSync(ToRunner("r2") + ".>")
	rc.Flush()
	dc.Publish(ToRunner("r2")+".start", []byte("x"))
	dc.Publish(ToRunner("r1")+".start", []byte("x"))
	dc.Flush()
	if _, err := fromR1.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("r1's own subject: %v", err)
	}
	if _, err := toR1.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("r1's own subject from the daemon: %v", err)
	}
	rc.Flush()
	dc.Flush()
	for name, s := range map[string]*nats.Subscription{"r2's subject": fromR2, "the JetStream API": jsAPI, "r1 hearing r2's": toR2} {
		if n, _, _ := s.Pending(); n != 0 {
			t.Errorf("%s: %d messages got through", name, n)
		}
	}

	if !e.Allowed("r1") || !e.Allowed("made-by-admin") {
		t.Error("a runner not revoked is not allowed")
	}
	if err := e.RevokeRunner("r1"); err != nil {
		t.Fatal(err)
	}
	if e.Allowed("r1") {
		t.Error("r1 allowed after its revocation")
	}
	if _, err := e.AddRunner("r1"); err == nil || !strings.Contains(err.Error(), "pick another name") {
		t.Errorf("adding r1 again while its user is valid: %v", err)
	}
	// The registry outlives the daemon.
	e2, err := DialExternal(ctx, ExternalOptions{URLs: c.url, CredsFile: c.creds, Dir: e.o.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if e2.Allowed("r1") {
		t.Error("r1 allowed by a daemon started again")
	}
	_, err = e2.AddRunner("r2")
	for _, want := range []string{"--nats-signing-key", "publish allow troupe.d.r2.>", "subscribe allow troupe.r.r2.>, _INBOX_R.r2.>", "allow responses"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("add without a signing key: %v; want %q in it", err, want)
		}
	}
}

// TestExternalStartErrors: each thing the daemon needs of the cluster,
// missing, is an error naming its flag.
func TestExternalStartErrors(t *testing.T) {
	c := startOperatorServer(t)
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not creds"), 0o600)
	open := filepath.Join(dir, "open.creds")
	b, _ := os.ReadFile(c.creds)
	os.WriteFile(open, b, 0o644)
	for _, tc := range []struct {
		name string
		o    ExternalOptions
		want string
	}{
		{"no creds", ExternalOptions{URLs: c.url}, "--nats-creds: missing"},
		{"bad creds", ExternalOptions{URLs: c.url, CredsFile: garbage}, "--nats-creds " + garbage + ": no user JWT"},
		{"creds others can read", ExternalOptions{URLs: c.url, CredsFile: open}, "--nats-creds " + open + ": mode -rw-r--r-- lets others read a secret: chmod 600"},
		{"bad url", ExternalOptions{URLs: "http://x", CredsFile: c.creds}, "--nats: \"http://x\""},
		{"unreachable", ExternalOptions{URLs: "nats://127.0.0.1:1", CredsFile: c.creds}, "--nats nats://127.0.0.1:1: cannot reach the cluster"},
		{"no jetstream", ExternalOptions{URLs: c.url, CredsFile: c.noJS}, "has no JetStream"},
		{"not a signing key", ExternalOptions{URLs: c.url, CredsFile: c.creds, SigningKeyFile: c.otherAccSK}, "--nats-signing-key " + c.otherAccSK + ": the cluster refuses a user it signs"},
		{"not a seed", ExternalOptions{URLs: c.url, CredsFile: c.creds, SigningKeyFile: garbage}, "--nats-signing-key " + garbage + ": not the seed"},
	} {
		tc.o.Dir = dir
		e, err := DialExternal(ctx, tc.o)
		if err == nil {
			e.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q in it", tc.name, err, tc.want)
		}
	}
}
