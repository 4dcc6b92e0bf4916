package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// natsCluster is three nats-server processes as a JetStream cluster on
// 127.0.0.1 in operator (JWT) mode, as a NATS admin runs one: an account
// for troupe with JetStream and a signing key, the daemon's user in it.
type natsCluster struct {
	nodes      []*natsNode
	creds      string // the daemon's user: a standard credentials file
	signingKey string // the account's signing key's seed
}

type natsNode struct {
	name       string
	port, http int
	cmd        *exec.Cmd
	logs       *syncBuffer
	done       chan struct{}
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsNode) kill() {
	syscall.Kill(n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

// buildNatsServer builds nats-server from the module cache (it is in
// go.mod). It skips where it cannot be built, except in CI.
func buildNatsServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nats-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build nats-server: %v\n%s", err, out)
		}
		t.Skipf("build nats-server (needed for this test; CI fails instead): %v\n%s", err, out)
	}
	return bin
}

func startNatsCluster(t *testing.T) *natsCluster {
	t.Helper()
	bin := buildNatsServer(t)
	dir := t.TempDir()
	key := func(f func() (nkeys.KeyPair, error)) (nkeys.KeyPair, string, []byte) {
		kp, err := f()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		return kp, pub, seed
	}
	okp, opub, _ := key(nkeys.CreateOperator)
	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	_, syspub, _ := key(nkeys.CreateAccount)
	sysjwt, err := jwt.NewAccountClaims(syspub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	akp, apub, _ := key(nkeys.CreateAccount)
	_, spub, sseed := key(nkeys.CreateAccount)
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "troupe"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: 64 << 20, DiskStorage: 8 << 30, Streams: -1, Consumer: -1}
	ac.SigningKeys.Add(spub)
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, upub, useed := key(nkeys.CreateUser)
	_ = ukp
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	credsText, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	c := &natsCluster{creds: filepath.Join(dir, "daemon.creds"), signingKey: filepath.Join(dir, "signing.nk")}
	if err := os.WriteFile(c.creds, credsText, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.signingKey, append(sseed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range cports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := range 3 {
		n := &natsNode{name: fmt.Sprintf("n%d", i+1), port: freePort(t), http: freePort(t), logs: &syncBuffer{}, done: make(chan struct{})}
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: %q, max_memory_store: 64MB, max_file_store: 8GB }
cluster { name: troupe-test, listen: 127.0.0.1:%d, routes: [%s] }
operator: %s
system_account: %s
resolver: MEMORY
resolver_preload: { %s: %s, %s: %s }
`, n.name, n.port, n.http, filepath.Join(dir, n.name), cports[i], strings.Join(routes, ", "), ojwt, syspub, syspub, sysjwt, apub, ajwt)
		confPath := filepath.Join(dir, n.name+".conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		n.cmd = exec.Command(bin, "-c", confPath)
		n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { n.cmd.Wait(); close(n.done) }()
		t.Cleanup(n.kill)
		c.nodes = append(c.nodes, n)
	}
	// Ready: every server says JetStream is current (the cluster formed
	// and has a metadata leader).
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for _, n := range c.nodes {
		for {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.http))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("nats server %s not healthy (%v):\n%s", n.name, err, n.logs.String())
			}
			<-tick.C
		}
	}
	return c
}

// clients are the names of the clients connected to node n.
func (n *natsNode) clients(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/connz", n.http))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestRunnerNatsCluster: the daemon on an existing cluster of three NATS
// servers (serve --nats, --nats-creds, --nats-signing-key), a runner whose
// user troupe runner add minted with the account's signing key, its agent
// asked by the person. The server both are connected to is SIGKILLed
// mid-turn: they reconnect to the others, the runner's stream (three
// replicas) lives on, the turn's answer arrives once and the next ask
// works. Then the runner is revoked: its stream is gone, its agent
// unreachable, and what it sends again (its credentials are still valid
// on the cluster) is ignored.
func TestRunnerNatsCluster(t *testing.T) {
	c := startNatsCluster(t)
	n1 := c.nodes[0]
	state := t.TempDir()
	proj := gitProject(t, runnerTeam)
	ctx, d, cl, p := serveProject(t, state, proj, append(os.Environ(), "HOME="+t.TempDir()), 4*time.Minute,
		"--nats", n1.url(), "--nats-creds", c.creds, "--nats-signing-key", c.signingKey, "--log-level", "debug")
	creds := filepath.Join(t.TempDir(), "r1.creds")
	r := startRunner(t, state, "r1", creds)
	if b, err := os.ReadFile(creds); err != nil || !strings.Contains(string(b), "jwt: ") || strings.Contains(string(b), "secret: ") {
		t.Fatalf("the runner's credentials: %v\n%s", err, b)
	} else if !strings.Contains(string(b), n1.url()+",") || !strings.Contains(string(b), c.nodes[1].url()) || !strings.Contains(string(b), c.nodes[2].url()) {
		// The daemon was given n1 alone: the others it heard of.
		t.Fatalf("the runner's credentials do not list the three servers, %s first:\n%s", n1.url(), b)
	}

	// The test's own look at the cluster, as the daemon's user.
	nc, err := nats.Connect(strings.Join([]string{c.nodes[1].url(), c.nodes[2].url()}, ","), nats.UserCredentials(c.creds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "troupe-d-r1")
	if err != nil {
		t.Fatalf("the runner's stream: %v\ndaemon:\n%s", err, d.logs.String())
	}
	if info, err := st.Info(ctx); err != nil || info.Config.Replicas != 3 {
		t.Fatalf("the runner's stream: %+v, %v; want 3 replicas", info, err)
	}
	// Both are on n1 (the only URL they were given), the one killed.
	if conns := n1.clients(t); !strings.Contains(conns, `"troupe daemon"`) || !strings.Contains(conns, `"troupe runner r1"`) {
		t.Fatalf("the daemon and the runner are not both on %s: %s", n1.name, conns)
	}

	ask := func(agent, text string) troupe.Request {
		t.Helper()
		res, err := cl.Ask(ctx, p.ID, troupe.AgentID(agent), text, 0)
		if err != nil {
			t.Fatalf("ask %s: %v\ndaemon:\n%s\nrunner:\n%s", agent, err, d.logs.String(), r.logs.String())
		}
		return res
	}
	if res := ask("coder", "warm up"); res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, "echo: warm up") {
		t.Fatalf("coder's first answer: %+v\nrunner:\n%s", res, r.logs.String())
	}

	errc := make(chan error, 1)
	var got troupe.Request
	go func() {
		var err error
		got, err = cl.Ask(ctx, p.ID, "coder", "!say before-the-kill\n!sleep 4s\n!say after-the-kill", 0)
		errc <- err
	}()
	waitAgent(t, cl, p.ID, "coder", troupe.StateBusy)
	n1.kill()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got.State != troupe.ReqAnswered || strings.Count(got.Answer, "after-the-kill") != 1 || strings.Count(got.Answer, "before-the-kill") != 1 {
		t.Fatalf("the ask across the server's death: %+v\ndaemon:\n%s\nrunner:\n%s", got, d.logs.String(), r.logs.String())
	}
	if res := ask("coder", "next"); res.State != troupe.ReqAnswered || !strings.Contains(res.Answer, "echo: next") {
		t.Fatalf("the ask after: %+v", res)
	}
	// Exactly once: the agent's log holds each turn once, its text whole.
	l, err := cl.AgentLog(ctx, p.ID, "coder", "", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, tu := range l.Turns {
		if strings.Contains(tu.Text, "kill") {
			killed++
			if strings.Count(tu.Text, "after-the-kill") != 1 || tu.Error != "" {
				t.Errorf("the turn across the server's death: text %q, error %q", tu.Text, tu.Error)
			}
		}
	}
	if killed != 1 || len(l.Turns) != 3 {
		t.Errorf("the coder's log: %d turns (want 3), %d across the kill (want 1)", len(l.Turns), killed)
	}
	// A runner added while a server is down connects too, its stream
	// placed on three servers (the cluster still counts the lost one).
	startRunner(t, state, "r2", filepath.Join(t.TempDir(), "r2.creds"), "--server", c.nodes[1].url())
	if st2, err := js.Stream(ctx, "troupe-d-r2"); err != nil || st2.CachedInfo().Config.Replicas != 3 {
		t.Errorf("r2's stream, made with %s down: %v; want 3 replicas", n1.name, err)
	}
	for _, who := range []*syncBuffer{d.logs, r.logs} {
		if !strings.Contains(who.String(), "bus reconnected") {
			t.Errorf("no reconnection after %s's death:\n%s", n1.name, who.String())
		}
	}

	// Revoked: the daemon drops the runner at once.
	if out, errOut, code := runCLI(t, state, "", "runner", "revoke", "r1"); code != 0 {
		t.Fatalf("runner revoke: %d\n%s%s", code, out, errOut)
	}
	if _, err := js.Stream(ctx, "troupe-d-r1"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the revoked runner's stream: %v; want it deleted", err)
	}
	if res := ask("coder", "revoked?"); res.State != troupe.ReqPending || !strings.Contains(res.Unreachable, "runner r1") {
		t.Fatalf("ask to the revoked runner's agent: %+v", res)
	}
	// The runner, started again with its credentials (still valid on the
	// cluster), is heard no more: its hello is dropped.
	r.kill(t)
	own := t.TempDir()
	again := exec.Command(binary, "runner", "--creds", creds, "--server", c.nodes[1].url(), "--root", filepath.Join(own, "root"), "--log-level", "debug")
	again.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	again.Env = append(os.Environ(), "HOME="+own, "XDG_STATE_HOME="+filepath.Join(own, "state"))
	rlogs := &syncBuffer{}
	again.Stdout, again.Stderr = rlogs, rlogs
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-again.Process.Pid, syscall.SIGKILL); again.Wait() }()
	if l := d.logs.waitFor(time.Minute, "dropped a request of a runner not allowed (revoked)"); !strings.Contains(l, "dropped a request of a runner not allowed (revoked)") {
		t.Fatalf("the daemon did not drop the revoked runner's hello:\n%s\nrunner:\n%s", l, rlogs.String())
	}
	if strings.Contains(rlogs.String(), "connected to the daemon") {
		t.Errorf("the revoked runner was greeted:\n%s", rlogs.String())
	}
	if _, err := js.Stream(ctx, "troupe-d-r1"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the revoked runner's stream came back: %v", err)
	}
	if out, _, _ := runCLI(t, state, "", "runners"); strings.Contains(out, "r1") {
		t.Errorf("troupe runners lists the revoked r1:\n%s", out)
	}
}

// TestRunnerNatsFlags: serve refuses --nats with --runners, its companions
// without it, and a cluster it cannot reach, each error naming the flags.
func TestRunnerNatsFlags(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "daemon.creds")
	os.WriteFile(creds, []byte("not creds"), 0o600)
	dead := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runners", "127.0.0.1:0", "--nats", dead}, "--runners and --nats: give one"},
		{[]string{"--nats-creds", creds}, "--nats-creds, --nats-signing-key and --nats-ca go with --nats URL"},
		{[]string{"--nats", dead}, "--nats-creds: missing"},
		{[]string{"--nats", dead, "--nats-creds", creds}, "--nats-creds " + creds + ": no user JWT in it"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...)
		out, errOut, code := runCLI(t, t.TempDir(), "", args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %v: exit %d, %q%q; want an error with %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
