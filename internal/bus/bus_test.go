package bus

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// syncBuffer is a log sink the tests read while servers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger(t testing.TB, buf *syncBuffer) *slog.Logger {
	if buf != nil {
		return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func startServer(t testing.TB, dir string, forceTLS bool) *Server {
	t.Helper()
	s, err := Start(ServerOptions{Dir: dir, Addr: "127.0.0.1:0", TLS: forceTLS, Logger: testLogger(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runner adds runner name and connects it over TCP.
func runner(t testing.TB, s *Server, name string) (Creds, *nats.Conn) {
	t.Helper()
	c, err := s.AddRunner(name)
	if err != nil {
		t.Fatal(err)
	}
	nc := dial(t, c)
	return c, nc
}

func dial(t testing.TB, c Creds) *nats.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := Dial(ctx, c, testLogger(t, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// barrier makes sure everything the daemon published before it reached
// the runner: the runner receives, in order, a message on its own subject.
func barrier(t *testing.T, s *Server, rc *nats.Conn, name string) {
	t.Helper()
	sub, err := rc.SubscribeSync(ToRunner(name) + ".barrier")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Conn().Publish(ToRunner(name)+".barrier", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

func TestRunnerIsConfinedToItsOwnSubjects(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	_, a := runner(t, s, "a")
	runner(t, s, "b")
	d := s.Conn()

	// What the daemon hears: everything, so a publish that got through
	// would show.
	heard, err := d.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	d.Flush()

	// Allowed: A's own subjects both ways (so the refusals below are not
	// a dead connection's silence).
	own, err := a.SubscribeSync(ToRunner("a") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	// Forbidden subscriptions: B's subjects, B's inbox, everything, the
	// JetStream API and its acks, the daemon's inbox.
	var stolen []*nats.Subscription
	for _, subj := range []string{ToRunner("b") + ".>", Inbox("b") + ".>", FromRunner("b") + ".>", FromRunner("a") + ".>", ">", "$JS.API.>", "$JS.ACK.>", "_INBOX.>", "troupe.>"} {
		sub, err := a.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		stolen = append(stolen, sub)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{ToRunner("b") + ".cmd", Inbox("b") + ".x", FromRunner("b") + ".x", "$JS.API.x", "_INBOX.x", ToRunner("a") + ".cmd"} {
		if err := d.Publish(subj, []byte("for "+subj)); err != nil {
			t.Fatal(err)
		}
	}
	barrier(t, s, a, "a")
	for _, sub := range stolen {
		if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
			t.Errorf("runner a subscribed to %s and got %s: %q", sub.Subject, m.Subject, m.Data)
		}
	}
	if m, err := own.NextMsg(time.Second); err != nil || m.Subject != ToRunner("a")+".cmd" {
		t.Fatalf("runner a on its own subject: %v %v", m, err)
	}

	// Forbidden publishes: B's subjects both ways, the JetStream API, the
	// daemon's inbox, a bare subject. Then an allowed one, which the daemon
	// must hear first.
	for _, subj := range []string{FromRunner("b") + ".x", ToRunner("b") + ".x", ToRunner("a") + ".x", Inbox("b") + ".x", "$JS.API.STREAM.NAMES", "_INBOX.x", "x"} {
		if err := a.Publish(subj, []byte("from a")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Publish(FromRunner("a")+".ok", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	for {
		m, err := heard.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("the daemon did not hear runner a's allowed publish: %v", err)
		}
		if m.Subject == FromRunner("a")+".ok" {
			break
		}
		if string(m.Data) == "from a" {
			t.Errorf("runner a published on %s", m.Subject)
		}
	}

	// The JetStream API, as a request: refused (the daemon's works).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := d.RequestWithContext(ctx, "$JS.API.INFO", nil); err != nil {
		t.Fatalf("daemon's JetStream API request: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if m, err := a.RequestWithContext(ctx2, "$JS.API.INFO", nil); err == nil {
		t.Errorf("runner a called the JetStream API: %s", m.Data)
	}
}

// A runner answers the requests it receives, once; it cannot publish on
// their reply subject a second time.
func TestRunnerAnswersARequestOnce(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	_, a := runner(t, s, "a")
	d := s.Conn()
	sub, err := a.Subscribe(ToRunner("a")+".ping", func(m *nats.Msg) {
		m.Respond([]byte("pong"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	a.Flush()
	inbox := nats.NewInbox()
	got, err := d.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PublishRequest(ToRunner("a")+".ping", inbox, nil); err != nil {
		t.Fatal(err)
	}
	if m, err := got.NextMsg(5 * time.Second); err != nil || string(m.Data) != "pong" {
		t.Fatalf("answer: %v %v", m, err)
	}
	// A second message on the same reply subject is refused.
	a.Publish(inbox, []byte("again"))
	a.Flush()
	barrier(t, s, a, "a")
	if m, err := got.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("runner a published twice on a reply subject: %q", m.Data)
	}
}

func TestDurablePublishIsAcknowledgedOnTheRunnersInbox(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	_, a := runner(t, s, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	djs, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := EnsureStream(ctx, djs, "a", 4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The runner publishes with a plain request: the acknowledgement comes
	// back on its own inbox, with no JetStream API right.
	m := nats.NewMsg(Durable("a") + ".task.t1")
	m.Data = []byte("done")
	m.Header.Set(jetstream.MsgIDHeader, "task:t1")
	reply, err := a.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("durable publish: %v", err)
	}
	if !strings.HasPrefix(reply.Subject, Inbox("a")+".") {
		t.Errorf("ack came on %s, not runner a's inbox", reply.Subject)
	}
	if !strings.Contains(string(reply.Data), `"stream":"`+StreamName("a")+`"`) || !strings.Contains(string(reply.Data), `"seq":1`) {
		t.Fatalf("ack: %s", reply.Data)
	}
	// The same idempotency key again: acknowledged as a duplicate, kept once.
	rjs, err := jetstream.New(a)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := rjs.Publish(ctx, Durable("a")+".task.t1", []byte("done"), jetstream.WithMsgID("task:t1"))
	if err != nil {
		t.Fatalf("durable publish through jetstream.Publish: %v", err)
	}
	if !ack.Duplicate {
		t.Errorf("second publish of task:t1 not seen as a duplicate: %+v", ack)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", info.State.Msgs)
	}
	// A full stream refuses: the runner's publish fails; nothing is dropped.
	big := bytes.Repeat([]byte("x"), 1000)
	var refused error
	for i := range 10 {
		if _, err := rjs.Publish(ctx, Durable("a")+".fill", big, jetstream.WithMsgID("fill:"+string(rune('0'+i)))); err != nil {
			refused = err
			break
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum bytes") {
		t.Fatalf("a full stream accepted more (or failed otherwise): %v", refused)
	}
	if info, _ = st.Info(ctx); info.State.FirstSeq != 1 {
		t.Errorf("a message was dropped to make room: first seq %d", info.State.FirstSeq)
	}
	// Runner a cannot publish into runner b's stream.
	if _, err := EnsureStream(ctx, djs, "b", 4096, 1); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := rjs.Publish(ctx2, Durable("b")+".x", []byte("forged")); err == nil {
		t.Errorf("runner a published into runner b's stream")
	}
}

func TestRevokeClosesTheLiveConnectionAndRefusesTheCreds(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	c, a := runner(t, s, "a")
	_, b := runner(t, s, "b")
	closed := make(chan struct{})
	a.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := s.RevokeRunner("a"); err != nil {
		t.Fatal(err)
	}
	// Closed at once: the server holds no connection of a when Revoke
	// returns.
	if cz, err := s.srv.Connz(&server.ConnzOptions{User: "a", Username: true}); err != nil || cz.NumConns != 0 {
		t.Errorf("connections of a after its revocation: %v %v", cz, err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("runner a's connection still %v after its revocation", a.Status())
	}
	if got := s.Runners(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("runners %v, want [b]", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if nc, err := Dial(ctx, c, testLogger(t, nil), nil); err == nil {
		nc.Close()
		t.Fatal("revoked creds connected again")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("dial with revoked creds: %v, want an authorization error", err)
	}
	// The other runner is untouched.
	if !b.IsConnected() {
		t.Errorf("runner b lost its connection: %v", b.Status())
	}
	// The name can be added again, with a new secret; the old one stays
	// refused.
	c2, err := s.AddRunner("a")
	if err != nil {
		t.Fatal(err)
	}
	if c2.Secret == c.Secret {
		t.Fatal("a re-added runner got the same secret")
	}
	if nc, err := Dial(ctx, c, testLogger(t, nil), nil); err == nil {
		nc.Close()
		t.Fatal("the old secret connects after the name was added again")
	}
	dial(t, c2)
}

func TestAddRunnerRefusesAnExistingName(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	if _, err := s.AddRunner("a"); err != nil {
		t.Fatal(err)
	}
	_, err := s.AddRunner("a")
	if err == nil || !strings.Contains(err.Error(), "revoke") {
		t.Fatalf("adding a twice: %v", err)
	}
	if _, err := s.AddRunner("Bad_Name"); err == nil {
		t.Fatal("a bad name was added")
	}
	if err := s.RevokeRunner("nope"); err == nil {
		t.Fatal("revoked a runner that does not exist")
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "gpu-box-2": true, "0": true, strings.Repeat("a", 32): true,
		"": false, "-a": false, "A": false, "a.b": false, "a*": false, "a>": false, "a b": false,
		"a_b": false, strings.Repeat("a", 33): false, "_daemon": false,
	} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// The server lets a client name any subject as the reply of what it
// publishes. A runner naming another runner's subject, or the JetStream
// API, as the reply of its durable publish or of a request the daemon
// answers must not get the stream's acknowledgement or the daemon's answer
// published there.
func TestForgedReplySubjectsStayInTheRunnersAccount(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	_, a := runner(t, s, "a")
	_, b := runner(t, s, "b")
	d := s.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	djs, err := jetstream.New(d)
	if err != nil {
		t.Fatal(err)
	}
	stA, err := EnsureStream(ctx, djs, "a", 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	stB, err := EnsureStream(ctx, djs, "b", 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Request(Durable("b")+".x", []byte("b's"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The daemon answers what runners ask it, as internal/remote will.
	ans, err := d.Subscribe(FromRunner("a")+".ask", func(m *nats.Msg) { m.Respond([]byte(`{"secret":"daemon data"}`)) })
	if err != nil {
		t.Fatal(err)
	}
	defer ans.Unsubscribe()
	d.Flush()
	atB, err := b.SubscribeSync(ToRunner("b") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	heard, err := d.SubscribeSync(ToRunner("b") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	b.Flush()
	d.Flush()
	for _, reply := range []string{ToRunner("b") + ".evil", Inbox("b") + ".evil"} {
		a.PublishRequest(Durable("a")+".x", reply, []byte("a's"))
		a.PublishRequest(FromRunner("a")+".ask", reply, nil)
	}
	for _, api := range []string{"STREAM.DELETE.", "STREAM.PURGE.", "STREAM.MSG.DELETE."} {
		a.PublishRequest(Durable("a")+".x", "$JS.API."+api+StreamName("b"), []byte("a's"))
		a.PublishRequest(FromRunner("a")+".ask", "$JS.API."+api+StreamName("b"), nil)
	}
	a.Flush()
	// One more durable publish, acknowledged: the stream handles a's
	// messages in order, so the forged ones were stored and acknowledged
	// before this one.
	if _, err := a.RequestWithContext(ctx, Durable("a")+".last", nil); err != nil {
		t.Fatal(err)
	}
	if info, err := stA.Info(ctx); err != nil || info.State.Msgs != 6 {
		t.Fatalf("a's stream: %+v %v, want 6 messages", info, err)
	}
	// And the daemon answered a's asks before a's next one.
	if _, err := a.RequestWithContext(ctx, FromRunner("a")+".ask", nil); err != nil {
		t.Fatal(err)
	}
	barrier(t, s, b, "b")
	for {
		m, err := atB.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		if m.Subject != ToRunner("b")+".barrier" {
			t.Errorf("runner b got %s: %s", m.Subject, m.Data)
		}
	}
	for {
		m, err := heard.NextMsg(10 * time.Millisecond)
		if err != nil {
			break
		}
		if m.Subject != ToRunner("b")+".barrier" {
			t.Errorf("the daemon's account saw %s: %s", m.Subject, m.Data)
		}
	}
	info, err := stB.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Errorf("b's stream after a's forged replies: %+v %v", info, err)
	}
}

func TestSecretStaysOutOfLogs(t *testing.T) {
	var buf syncBuffer
	log := testLogger(t, &buf)
	s, err := Start(ServerOptions{Dir: t.TempDir(), Addr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.AddRunner("a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := Dial(ctx, c, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("creds", "creds", c, "text", c.String())
	s.RevokeRunner("a")
	bad := c
	bad.Secret = "wrong-" + c.Secret
	Dial(ctx, bad, log, nil)
	nc.Close()
	data, _ := os.ReadFile(filepath.Join(s.dir, runnersName))
	for what, text := range map[string]string{"log": buf.String(), "runners.json": string(data)} {
		if strings.Contains(text, c.Secret) {
			t.Errorf("the secret is in the %s", what)
		}
	}
	if !strings.Contains(buf.String(), "runner revoked") {
		t.Errorf("the log was not captured: %s", buf.String())
	}
}

func TestTLSPinsTheServersCertificate(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, true)
	if !strings.HasPrefix(s.URL(), "tls://127.0.0.1:") {
		t.Fatalf("URL %s, want tls://127.0.0.1:port", s.URL())
	}
	c, a := runner(t, s, "a")
	if c.CA == "" || !strings.HasPrefix(c.CA, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("creds carry no certificate: %q", c.CA)
	}
	if _, err := a.TLSConnectionState(); err != nil {
		t.Fatalf("runner connection without TLS: %v", err)
	}
	// Through a creds file, as a runner on another machine gets it.
	path := filepath.Join(t.TempDir(), "a.creds")
	if err := WriteCreds(path, c); err != nil {
		t.Fatal(err)
	}
	c2, err := ReadCreds(path)
	if err != nil {
		t.Fatal(err)
	}
	dial(t, c2)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// Without the pinned certificate (the system's roots only): refused.
	if nc, err := nats.Connect(s.URL(), nats.UserInfo(c.User, c.Secret), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("a client without the pinned certificate connected")
	}
	// In plain text: refused.
	plain := "nats://" + strings.TrimPrefix(s.URL(), "tls://")
	if nc, err := nats.Connect(plain, nats.UserInfo(c.User, c.Secret), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("a client connected without TLS")
	}
	// Pinning another server's certificate (same name, other key): refused.
	other := startServer(t, t.TempDir(), true)
	oc, err := other.AddRunner("a")
	if err != nil {
		t.Fatal(err)
	}
	forged := c
	forged.CA = oc.CA
	if nc, err := Dial(ctx, forged, testLogger(t, nil), nil); err == nil {
		nc.Close()
		t.Error("a runner trusting another certificate connected")
	}
	// The certificate is kept: a restart serves the same one.
	s.Close()
	s2 := startServer(t, dir, true)
	c.URL = s2.URL()
	dial(t, c)
}

func TestTLSIsOnOutsideLoopback(t *testing.T) {
	for host, loop := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "127.1.2.3": true, "": false, "0.0.0.0": false, "::": false, "192.168.1.2": false, "example.org": false} {
		if got := isLoopback(host); got != loop {
			t.Errorf("isLoopback(%q) = %v, want %v", host, got, loop)
		}
	}
}

func TestCredsFile(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, t.TempDir(), true)
	c, err := s.AddRunner("gpu-1")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gpu-1.creds")
	if err := WriteCreds(path, c); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("creds file mode: %v %v", fi.Mode(), err)
	}
	got, err := ReadCreds(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("read back %+v, want %+v", got, c)
	}
	good, _ := os.ReadFile(path)
	text := string(good)
	line := func(key string) string {
		for l := range strings.Lines(text) {
			if strings.HasPrefix(l, key+": ") {
				return l
			}
		}
		t.Fatalf("no %s line in %s", key, text)
		return ""
	}
	cases := []struct {
		name, text string
		mode       os.FileMode
		want       string // in the error
	}{
		{"readable by others", text, 0o644, "chmod 600"},
		{"no secret", strings.Replace(text, line("secret"), "", 1), 0o600, `"secret" is missing`},
		{"empty secret", strings.Replace(text, line("secret"), "secret:\n", 1), 0o600, "secret is empty"},
		{"no url", strings.Replace(text, line("url"), "", 1), 0o600, `"url" is missing`},
		{"unknown field", "token: x\n" + text, 0o600, `unknown field "token"`},
		{"twice", line("user") + text, 0o600, `"user" given twice`},
		{"http url", strings.Replace(text, line("url"), "url: http://h:1\n", 1), 0o600, "field url"},
		{"url without port", strings.Replace(text, line("url"), "url: tls://h\n", 1), 0o600, "field url"},
		{"url with a password", strings.Replace(text, line("url"), "url: nats://u:p@h:1\n", 1), 0o600, "field url"},
		{"bad name", strings.Replace(text, line("name"), "name: GPU_1\n", 1), 0o600, "field name"},
		{"not key: value", strings.Replace(text, line("user"), "user gpu-1\n", 1), 0o600, `want "key: value"`},
		{"bad certificate", strings.Replace(text, "MII", "MIX", 1), 0o600, "certificate"},
		{"text after the certificate", text + "junk\n", 0o600, "certificate"},
		{"a key, not a certificate", strings.ReplaceAll(text, "CERTIFICATE", "PRIVATE KEY"), 0o600, "certificate"},
		{"empty", "", 0o600, `"name" is missing`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.creds")
			if err := os.WriteFile(p, []byte(tc.text), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, tc.mode)
			_, err := ReadCreds(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadCreds: %v, want an error with %q", err, tc.want)
			}
		})
	}
	if _, err := ReadCreds(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was read")
	}
	if _, err := ReadCreds(dir); err == nil {
		t.Error("a folder was read")
	}
	if err := WriteCreds(filepath.Join(dir, "bad"), Creds{Name: "x", URL: "nats://h:1", User: "x"}); err == nil {
		t.Error("creds without a secret written")
	}
}

// The daemon's user connects in-process only, a runner's over the network
// only, each with its own password.
func TestAuthenticationByConnectionKind(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	c, err := s.AddRunner("a")
	if err != nil {
		t.Fatal(err)
	}
	tcp := strings.TrimPrefix(s.URL(), "nats://")
	for _, tc := range []struct {
		name string
		opts []nats.Option
		url  string
		ok   bool
	}{
		{"daemon in-process", []nats.Option{nats.InProcessServer(s.srv), nats.UserInfo(daemonUser, s.daemonPW)}, "", true},
		{"daemon over tcp", []nats.Option{nats.UserInfo(daemonUser, s.daemonPW)}, "nats://" + tcp, false},
		{"runner over tcp", []nats.Option{nats.UserInfo(c.User, c.Secret)}, "nats://" + tcp, true},
		{"runner, wrong secret", []nats.Option{nats.UserInfo(c.User, c.Secret+"x")}, "nats://" + tcp, false},
		{"runner, another's name", []nats.Option{nats.UserInfo("b", c.Secret)}, "nats://" + tcp, false},
		{"no user", nil, "nats://" + tcp, false},
	} {
		nc, err := nats.Connect(tc.url, append(tc.opts, nats.NoReconnect(), nats.Timeout(time.Second))...)
		if nc != nil {
			nc.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: connect error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// fakeClient is a connection as the server's authentication sees it (a
// failed in-process connect costs nats.go seconds, so these cases call the
// check directly).
type fakeClient struct {
	opts server.ClientOpts
	addr net.Addr
	user *server.User
}

func (f *fakeClient) GetOpts() *server.ClientOpts                 { return &f.opts }
func (f *fakeClient) GetTLSConnectionState() *tls.ConnectionState { return nil }
func (f *fakeClient) RegisterUser(u *server.User)                 { f.user = u }
func (f *fakeClient) RemoteAddress() net.Addr                     { return f.addr }
func (f *fakeClient) GetNonce() []byte                            { return nil }
func (f *fakeClient) Kind() int                                   { return server.CLIENT }
func (f *fakeClient) GetID() uint64                               { return 1 }

func TestAuthenticationInProcess(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	c, err := s.AddRunner("a")
	if err != nil {
		t.Fatal(err)
	}
	pipe, _ := net.Pipe()
	defer pipe.Close()
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	for _, tc := range []struct {
		name, user, pw string
		addr           net.Addr
		ok             bool
	}{
		{"daemon in-process", daemonUser, s.daemonPW, pipe.RemoteAddr(), true},
		{"daemon, wrong password", daemonUser, c.Secret, pipe.RemoteAddr(), false},
		{"daemon over tcp", daemonUser, s.daemonPW, tcp, false},
		{"runner over tcp", "a", c.Secret, tcp, true},
		{"runner in-process", "a", c.Secret, pipe.RemoteAddr(), false},
	} {
		f := &fakeClient{opts: server.ClientOpts{Username: tc.user, Password: tc.pw}, addr: tc.addr}
		if got := (authenticator{s}).Check(f); got != tc.ok {
			t.Errorf("%s: Check = %v, want %v", tc.name, got, tc.ok)
		}
		if tc.ok && tc.user == "a" && (f.user == nil || f.user.Permissions == nil || f.user.Account == nil || f.user.Account.Name != accountName("a")) {
			t.Errorf("%s: registered as %+v, want runner a's account and permissions", tc.name, f.user)
		}
	}
}

// TestTooFewPeers: three replicas asked of a server that is no cluster
// are refused in words TooFewPeers knows (the daemon then keeps one copy);
// other errors are not.
func TestTooFewPeers(t *testing.T) {
	s := startServer(t, t.TempDir(), false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	djs, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	_, err = EnsureStream(ctx, djs, "a", 4096, 3)
	if err == nil || !TooFewPeers(err) {
		t.Fatalf("three replicas on one server: %v; want an error TooFewPeers recognizes", err)
	}
	if _, err := EnsureStream(ctx, djs, "a", 4096, 1); err != nil {
		t.Fatalf("one replica then: %v", err)
	}
	if TooFewPeers(errors.New("something else")) || TooFewPeers(nil) {
		t.Error("TooFewPeers recognizes an error that is not JetStream's")
	}
}
