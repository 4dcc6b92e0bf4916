package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// ringTeam: each agent asks the next whatever it is given and says what
// it heard; critic closes the ring unless it is the end of a chain.
func ringTeam(closeRing bool) string {
	team := `
[[agent]]
name = "lead"
engine = "fake"
[agent.fake]
respond = "!ask researcher {text}\n!say lead heard: {result}"

[[agent]]
name = "researcher"
engine = "fake"
[agent.fake]
respond = "!ask critic {text}\n!say researcher heard: {result}"

[[agent]]
name = "critic"
engine = "fake"
`
	if closeRing {
		team += `[agent.fake]
respond = "!ask lead {text}\n!say critic heard: {result}"
`
	}
	return team
}

// serveProjects starts a daemon on the given project folders and returns a
// context bounded at a minute, a client and the projects.
func serveProjects(t *testing.T, dirs ...string) (context.Context, *client.Client, []api.Project) {
	t.Helper()
	state := t.TempDir()
	var args []string
	for _, d := range dirs {
		args = append(args, "--project", d)
	}
	startDaemon(t, state, args...)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	var ps []api.Project
	for _, d := range dirs {
		p, err := cl.ResolveProject(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ctx, cl, ps
}

// TestC13_BinaryAskCycleRefused: real daemon, fake agents over MCP. The
// person asks the lead; lead → researcher → critic → lead would close a
// cycle: the critic's ask is refused at once (a tool error on the event
// stream, naming the cycle), and the answer comes back down the chain. In a
// second project the same chain without the last link is answered.
func TestC13_BinaryAskCycleRefused(t *testing.T) {
	ring, chain := t.TempDir(), t.TempDir()
	writeTeam(t, ring, ringTeam(true))
	writeTeam(t, chain, ringTeam(false))
	ctx, cl, ps := serveProjects(t, ring, chain)
	rp, cp := ps[0], ps[1]
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const cycle = "critic → lead → researcher → critic"
	refused := make(chan string, 1)
	evctx, stopEvents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopEvents()
	wg.Go(func() { watchRefusal(evctx, cl, st.LastEvent, rp.ID, cycle, refused) })

	start := time.Now()
	req, err := cl.Ask(ctx, rp.ID, "lead", "is it safe?", 0)
	took := time.Since(start)
	if err != nil || req.State != troupe.ReqAnswered {
		t.Fatalf("ask of the ring = %+v, %v; want answered with the refusal", req, err)
	}
	if !strings.HasPrefix(req.Answer, "lead heard: researcher heard: critic heard: error: ask refused") ||
		!strings.Contains(req.Answer, cycle) || !strings.Contains(req.Answer, "send_message") {
		t.Fatalf("answer = %q; want the refusal naming %s, passed down the chain", req.Answer, cycle)
	}
	if took > 10*time.Second { // a generous bound: the ceiling it replaces is 4 h
		t.Fatalf("the cycle took %v to be refused", took)
	}
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatal("no tool error of the critic naming the cycle on the event stream")
	}

	req, err = cl.Ask(ctx, cp.ID, "lead", "is it safe?", 0)
	if err != nil || req.Answer != "lead heard: researcher heard: echo: is it safe?" {
		t.Fatalf("ask of the chain = %+v, %v; want the critic's echo through the chain", req, err)
	}
}

// watchRefusal follows the event stream from since until the critic of
// project p gets a tool error naming cycle, and sends it on refused.
func watchRefusal(ctx context.Context, cl *client.Client, since uint64, p troupe.ProjectID, cycle string, refused chan<- string) {
	cl.Events(ctx, since, nil, func(ev events.Event) error {
		if ev.Project != p || ev.Agent != "critic" || ev.Type != events.TypeAgentToolResult {
			return nil
		}
		var r events.AgentActivity
		if json.Unmarshal(ev.Data, &r) == nil && r.Tool != nil && r.Tool.IsError && strings.Contains(r.Tool.Output, cycle) {
			refused <- r.Tool.Output
			return errStop
		}
		return nil
	})
}

// TestBinaryVanishedFolderMessageWaits: the project's folder is renamed
// away, a message is sent: the agent is blocked, saying why; the folder is
// renamed back: the message is delivered.
func TestBinaryVanishedFolderMessageWaits(t *testing.T) {
	proj := t.TempDir()
	writeTeam(t, proj, twoAgents)
	ctx, cl, ps := serveProjects(t, proj)
	p := ps[0]
	away := proj + ".away"
	if err := os.Rename(proj, away); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cl.Send(ctx, p.ID, "researcher", "hello again")
	if err != nil {
		t.Fatal(err)
	}
	// The agent says it is blocked on the folder.
	_, err = cl.Events(ctx, st.LastEvent, nil, func(ev events.Event) error {
		if ev.Project != p.ID || ev.Agent != "researcher" || ev.Type != events.TypeAgentState {
			return nil
		}
		var s events.AgentState
		if json.Unmarshal(ev.Data, &s) == nil && s.State == troupe.StateBlocked {
			if !strings.Contains(s.Reason, proj) || !strings.Contains(s.Reason, "gone") {
				t.Errorf("blocked reason %q does not name the folder %s", s.Reason, proj)
			}
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("waiting for the researcher to be blocked: %v", err)
	}
	if err := os.Rename(away, proj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, cl, "the message to be delivered", func() bool {
		ms, err := allMessages(ctx, cl, p.ID, "researcher")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ms {
			if x.ID == m.ID {
				if x.State.Final() && x.State != troupe.MsgDelivered {
					t.Fatalf("message ended %s (%s), want delivered once the folder is back", x.State, x.Reason)
				}
				return x.State == troupe.MsgDelivered
			}
		}
		return false
	})
}
