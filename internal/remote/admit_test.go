package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestEmbeddedReplies: on the embedded server, a request reaches the
// daemon from a runner's account with the server's answer subject: one
// naming a runner's inbox itself did not come that way, and is dropped.
func TestEmbeddedReplies(t *testing.T) {
	srv, err := bus.Start(bus.ServerOptions{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc := srv.Conn()
	d := NewDaemon(DaemonOptions{Conn: nc, Dir: t.TempDir(), Beat: testBeat})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx, nil); close(done) }()
	defer func() { cancel(); <-done }()
	inbox, err := nc.SubscribeSync(bus.Inbox("r2") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	// Run's subscriptions are up once a request of a real runner is
	// answered.
	c, err := srv.AddRunner("r1")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := bus.Dial(context.Background(), c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	deadline := time.Now().Add(patience)
	for {
		m, err := rc.Request(bus.FromRunner("r1")+"."+opTool, []byte(`{"session":"x"}`), patience/30)
		if err == nil {
			if !strings.Contains(string(m.Data), "no session") {
				t.Fatalf("r1's request: %s", m.Data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r1's request: %v", err)
		}
	}
	if err := nc.PublishRequest(bus.FromRunner("r1")+"."+opTool, bus.Inbox("r2")+".forged", []byte(`{"session":"x"}`)); err != nil {
		t.Fatal(err)
	}
	// Flushed, the forged request is at the daemon's subscription before
	// the next one of r1, which is answered: it was handled by then.
	if err := nc.FlushTimeout(patience); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Request(bus.FromRunner("r1")+"."+opTool, []byte(`{"session":"x"}`), patience); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if err := nc.FlushTimeout(patience); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := inbox.Pending(); n != 0 {
		t.Errorf("the daemon answered on r2's inbox %d times", n)
	}
}

// TestSharedAccountReplies: on an account the runners share with the
// daemon (an existing cluster), a request of runner r1 is answered only on
// r1's own inbox: one naming r2's inbox as its reply subject, or the
// daemon's, is dropped; nothing of a runner that is not allowed (revoked)
// is answered.
func TestSharedAccountReplies(t *testing.T) {
	srv, err := bus.Start(bus.ServerOptions{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nc := srv.Conn() // every right: a runner of the shared account, forging at will
	d := NewDaemon(DaemonOptions{Conn: nc, Dir: t.TempDir(), Beat: testBeat,
		Allowed: func(name string) bool { return name != "gone" }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx, nil); close(done) }()
	defer func() { cancel(); <-done }()

	sub := func(subject string) *nats.Subscription {
		s, err := nc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r1, r2, daemonSide, gone := sub(bus.Inbox("r1")+".>"), sub(bus.Inbox("r2")+".>"), sub("troupe.d.r2.>"), sub(bus.Inbox("gone")+".>")
	ask := func(runner, reply string) {
		t.Helper()
		if err := nc.PublishMsg(&nats.Msg{Subject: bus.FromRunner(runner) + "." + opTool, Reply: reply, Data: []byte(`{"session":"x"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	waitSubscribed(t, nc)
	ask("r1", bus.Inbox("r2")+".forged")
	ask("r1", "troupe.d.r2.hello")
	ask("gone", bus.Inbox("gone")+".1")
	ask("r1", bus.Inbox("r1")+".own")
	if m, err := r1.NextMsg(patience); err != nil || m.Subject != bus.Inbox("r1")+".own" {
		t.Fatalf("r1's request on its own inbox: %v, %v", m, err)
	}
	// Run waits for every handler: once it is back, every answer the
	// daemon sent is at the server, and a flush brings it here.
	cancel()
	<-done
	if err := nc.FlushTimeout(patience); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*nats.Subscription{"r2's inbox": r2, "the daemon's subject": daemonSide, "a revoked runner's inbox": gone} {
		if n, _, _ := s.Pending(); n != 0 {
			m, _ := s.NextMsg(time.Millisecond)
			t.Errorf("the daemon answered on %s: %s %q", name, m.Subject, m.Data)
		}
	}
}

// waitSubscribed returns once the daemon's subscriptions are at the
// server (Run made them): a request then reaches them.
func waitSubscribed(t *testing.T, nc *nats.Conn) {
	t.Helper()
	s, err := nc.SubscribeSync(bus.Inbox("probe") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if err := nc.PublishRequest(bus.FromRunner("probe")+"."+opTool, bus.Inbox("probe")+".p", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.NextMsg(patience / 30); err == nil {
			return
		}
	}
	t.Fatal("the daemon did not subscribe")
}

// TestDropEndsTheRunnersSessions: a runner dropped (revoked) ends its
// sessions at once as unreachable, the turn in flight with that reason;
// its stream is deleted and it is not reachable.
func TestDropEndsTheRunnersSessions(t *testing.T) {
	rg := newRig(t)
	rg.runner("r1")
	s := rg.start()
	if end := turn(t, s, "t1", "!cwd"); end.Error != "" {
		t.Fatalf("first turn: %+v", end)
	}
	if err := s.Send(context.Background(), engine.Input{Turn: "t2", Messages: []troupe.Message{{ID: 2, From: "@person", Kind: troupe.KindMessage, Text: "!sleep 1m"}}}); err != nil {
		t.Fatal(err)
	}
	if err := rg.d.Drop(rg.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	end := turnEnd(t, s)
	if end.Limit == nil || end.Limit.Unreachable == nil || end.Limit.Unreachable.Runner != "r1" {
		t.Fatalf("the turn in flight when its runner was dropped: %+v", end)
	}
	timeout := time.After(patience)
drain:
	for {
		select {
		case _, ok := <-s.Events():
			if !ok {
				break drain
			}
		case <-timeout:
			t.Fatal("the session's events still open after its runner was dropped")
		}
	}
	if u, ok := errors.AsType[*engine.Unreachable](s.Err()); !ok || u.Runner != "r1" {
		t.Errorf("the session's end: %v, want unreachable (runner r1)", s.Err())
	}
	if err := rg.d.Reachable("r1"); err == nil {
		t.Error("r1 reachable after it was dropped")
	}
	js, err := jetstream.New(rg.srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(rg.ctx, bus.StreamName("r1")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("r1's stream after the drop: %v, want it deleted", err)
	}
}
