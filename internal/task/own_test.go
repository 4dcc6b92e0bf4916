package task

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRunOwnReturnsTheEndToTheCaller: a task of troupe's own ends back to
// its caller with its exit code and output, and leaves no row, no message
// and no folder.
func TestRunOwnReturnsTheEndToTheCaller(t *testing.T) {
	h := newHarness(t, nil)
	m, stop := h.run(t)
	e, err := m.RunOwn(context.Background(), p1dev, h.proj, Job{Command: "echo out; echo err >&2; exit 3", Timeout: time.Minute}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if e.Result.State != Exited || e.Result.ExitCode != 3 || !strings.Contains(string(e.Tail), "out\nerr\n") {
		t.Fatalf("end = %+v, tail %q", e.Result, e.Tail)
	}
	if ts, _ := h.store.Tasks(context.Background(), p1dev.Project); len(ts) != 0 {
		t.Fatalf("rows = %+v; want none", ts)
	}
	if ents, _ := os.ReadDir(h.dir); len(ents) != 0 {
		t.Fatalf("task folders left: %v", ents)
	}
	stop()
	h.noMore(t)
}

// TestRunOwnKilledWhenTheCallerGivesUp: the caller's context ending kills
// the job, and RunOwn still returns its end.
func TestRunOwnKilledWhenTheCallerGivesUp(t *testing.T) {
	h := newHarness(t, nil)
	m, _ := h.run(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := fifo(t, "ready")
	done := make(chan Ended, 1)
	go func() {
		e, err := m.RunOwn(ctx, p1dev, h.proj, Job{Command: "echo > " + ready + "; sleep 600"}, 1024)
		if err != nil {
			t.Error(err)
		}
		done <- e
	}()
	awaitReady(t, ready)
	cancel()
	select {
	case e := <-done:
		if e.Result.State != Killed {
			t.Fatalf("end = %+v; want killed", e.Result)
		}
	case <-time.After(patience):
		t.Fatal("RunOwn did not return after its context ended")
	}
}
