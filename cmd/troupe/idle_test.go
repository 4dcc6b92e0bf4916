package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
)

// TestBinaryIdleSessionStopsAndTheNextAskStartsIt: a fake agent with
// idle_timeout = "1s" is stopped a second after its answer (event
// agent.state stopped, its process gone); the next ask starts a new
// session and is answered.
func TestBinaryIdleSessionStopsAndTheNextAskStartsIt(t *testing.T) {
	t.Parallel()
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, "[[agent]]\nname = \"lead\"\nengine = \"fake\"\nidle_timeout = \"1s\"\n")
	d := startDaemon(t, state, "--project", proj)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Ask(ctx, p.ID, "lead", "hi", 0); err != nil {
		t.Fatal(err)
	}
	kids := children(t, d.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("daemon has %d children after the ask, want the agent's session", len(kids))
	}
	answered := time.Now()
	var stopped events.AgentState
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Type != events.TypeAgentState || ev.Agent != "lead" {
			return nil
		}
		if err := json.Unmarshal(ev.Data, &stopped); err != nil {
			return err
		}
		if stopped.State == "stopped" {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("waiting for lead to stop: %v", err)
	}
	if waited := time.Since(answered); waited > 30*time.Second {
		t.Errorf("stopped %v after its answer, want about 1s", waited)
	}
	if want := "idle for 1s: stopped; the next message starts it again"; stopped.Reason != want {
		t.Errorf("stop reason %q, want %q", stopped.Reason, want)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", kids[0])); err == nil {
		t.Errorf("the agent's process %d is still there after its idle stop", kids[0])
	}
	req, err := cl.Ask(ctx, p.ID, "lead", "again", 0)
	if err != nil || req.Answer == "" {
		t.Fatalf("ask after the idle stop = %+v, %v; want an answer", req, err)
	}
	if kids := children(t, d.cmd.Process.Pid); len(kids) != 1 {
		t.Errorf("daemon has %d children after the next ask, want its new session", len(kids))
	}
}
