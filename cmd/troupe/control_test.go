package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestBinaryInterruptResetAndPermissions drives the person's controls
// through the real binary and fake-agent processes: interrupt ends the
// turn in flight (its ask fails "interrupted"), reset starts a new
// session, and the permission commands answer clearly when nothing waits.
func TestBinaryInterruptResetAndPermissions(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, crashTeam)
	startDaemon(t, state, "--project", proj)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}

	if _, errs, code := runCLI(t, state, proj, "interrupt", "worker"); code == 0 || !strings.Contains(errs, "worker has no turn in flight") {
		t.Fatalf("interrupt without a turn: exit %d, stderr %q", code, errs)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		req troupe.Request
		err error
	}
	asked := make(chan outcome, 1)
	go func() {
		req, err := cl.Ask(ctx, p.ID, "worker", "!sleep 1h", 0)
		asked <- outcome{req, err}
	}()
	errStarted := errors.New("started")
	if _, err := cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Type == events.TypeTurnStarted && ev.Agent == "worker" {
			return errStarted
		}
		return nil
	}); !errors.Is(err, errStarted) {
		t.Fatalf("waiting for the worker's turn: %v", err)
	}
	if out := mustTroupe(t, state, proj, "interrupt", "worker"); !strings.Contains(out, "interrupted") {
		t.Errorf("interrupt printed %q", out)
	}
	o := <-asked
	if o.err != nil || o.req.State != troupe.ReqFailed || !strings.Contains(o.req.Error, "interrupted") {
		t.Fatalf("the interrupted ask = %+v, %v; want failed: interrupted", o.req, o.err)
	}

	if out := mustTroupe(t, state, proj, "reset", "worker"); !strings.Contains(out, "conversation reset") {
		t.Errorf("reset printed %q", out)
	}
	var as []api.Agent
	listJSON(mustTroupe(t, state, proj, "agents", "--json"), "agents", &as)
	if len(as) != 2 || as[1].State != troupe.StateStopped || as[1].SessionID != "" {
		t.Fatalf("agents after reset = %+v, want worker stopped, no conversation", as)
	}
	if out := mustTroupe(t, state, proj, "ask", "worker", "hello"); out != "echo: hello\n" {
		t.Fatalf("ask after reset = %q, want a new session's echo", out)
	}
	if _, errs, code := runCLI(t, state, proj, "reset", "ghost"); code == 0 || !strings.Contains(errs, "no agent named \"ghost\"") {
		t.Errorf("reset ghost: exit %d, stderr %q", code, errs)
	}

	if out := mustTroupe(t, state, proj, "permissions"); !strings.Contains(out, "no permission request waits on you") {
		t.Errorf("permissions printed %q", out)
	}
	if out := mustTroupe(t, state, proj, "permissions", "--json"); strings.Join(strings.Fields(out), "") != `{"permissions":[]}` {
		t.Errorf("permissions --json printed %q, want []", out)
	}
	if _, errs, code := runCLI(t, state, proj, "allow", "perm-nope"); code == 0 || !strings.Contains(errs, "troupe permissions") {
		t.Errorf("allow of an unknown id: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := runCLI(t, state, proj, "deny", "perm-nope", "--reason", "no"); code == 0 || !strings.Contains(errs, "perm-nope") {
		t.Errorf("deny of an unknown id: exit %d, stderr %q", code, errs)
	}
}
