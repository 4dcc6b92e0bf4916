package bus

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// childEnv names the folder of a server this test binary runs as a child
// process (see TestMain), so that a test can SIGKILL it.
const childEnv = "TROUPE_BUS_TEST_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(runChild(dir))
	}
	os.Exit(m.Run())
}

// runChild starts a server in dir with runner "a" and its stream, writes
// a's creds to dir/a.creds, says "ready" and serves until killed.
func runChild(dir string) int {
	s, err := Start(ServerOptions{Dir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := s.AddRunner("a")
	if err == nil {
		err = WriteCreds(filepath.Join(dir, "a.creds"), c)
	}
	if err == nil {
		var js jetstream.JetStream
		if js, err = jetstream.New(s.Conn()); err == nil {
			_, err = EnsureStream(context.Background(), js, "a", 1<<20, 1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

// A server killed with SIGKILL (no shutdown, no flush) and started again on
// the same folder keeps the runners' accounts and every message it
// acknowledged.
func TestRestartKeepsAccountsAndAcknowledgedMessages(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child server: %q %v", line, err)
	}
	c, err := ReadCreds(filepath.Join(dir, "a.creds"))
	if err != nil {
		t.Fatal(err)
	}
	a := dial(t, c)
	js, err := jetstream.New(a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 50
	for i := range n {
		if _, err := js.Publish(ctx, Durable("a")+".task", []byte(strconv.Itoa(i)), jetstream.WithMsgID("task:"+strconv.Itoa(i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// Killed right after the last acknowledgement.
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	a.Close()

	s := startServer(t, dir, false)
	// A SIGKILL leaves the kernel's page cache, so this test passes without
	// an fsync per write too; a power cut would not. What holds that case
	// is the server's configuration: every write fsync'd.
	if jc := s.srv.JetStreamConfig(); jc == nil || !jc.SyncAlways {
		t.Errorf("JetStream without SyncAlways: an acknowledged message can be lost on a power cut")
	}
	if got := s.Runners(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("runners after the restart: %v, want [a]", got)
	}
	c.URL = s.URL() // a new port; the same secret
	dial(t, c)
	djs, err := jetstream.New(s.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := djs.Stream(ctx, StreamName("a"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatalf("acknowledged message %d lost: %v", i+1, err)
		}
		if string(m.Data) != strconv.Itoa(i) {
			t.Fatalf("message %d: %q, want %q", i+1, m.Data, strconv.Itoa(i))
		}
	}
	// A publish retried after the restart with a key it already used is a
	// duplicate, not a second copy.
	a2 := dial(t, c)
	js2, _ := jetstream.New(a2)
	if ack, err := js2.Publish(ctx, Durable("a")+".task", []byte("0"), jetstream.WithMsgID("task:0")); err != nil || !ack.Duplicate {
		t.Errorf("retry of task:0 after the restart: %+v %v, want a duplicate", ack, err)
	}
}
