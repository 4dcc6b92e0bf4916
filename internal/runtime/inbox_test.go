package runtime

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestC5_MessagesToABusyAgentAreBatchedIntoItsNextTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		ctx := t.Context()
		r := key(p1, "researcher")
		if _, err := h.rt.Send(ctx, r, "lead", troupe.KindMessage, "silent 9m then done"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st, _ := h.rt.AgentState(r); st != troupe.StateBusy {
			t.Fatalf("state = %s, want busy", st)
		}
		for i := range 3 {
			h.rt.Send(ctx, r, "lead", troupe.KindMessage, fmt.Sprint("note ", i))
		}
		synctest.Wait()
		if n := len(h.eng.Inputs()); n != 1 {
			t.Fatalf("%d turns while busy, want 1: messages are never typed into a busy turn", n)
		}
		<-time.After(11 * time.Minute)
		synctest.Wait()
		ins := h.eng.Inputs()
		if len(ins) != 2 || len(ins[1].Messages) != 3 {
			t.Fatalf("turns = %+v; want a second turn with the 3 notes batched", ins)
		}
		conv, _ := h.store.Conversation(ctx, p1, inbox.Page{Agent: "researcher"})
		for _, m := range conv {
			if m.State != troupe.MsgDelivered {
				t.Errorf("message %d %q is %s, want delivered", m.ID, m.Text, m.State)
			}
		}
		if st, _ := h.rt.AgentState(r); st != troupe.StateIdle {
			t.Fatalf("state = %s, want idle", st)
		}
	})
}

func TestC5_AnAskGetsATurnOfItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		ctx := t.Context()
		r := key(p1, "researcher")
		h.rt.Send(ctx, r, "lead", troupe.KindMessage, "silent 1m then ok")
		synctest.Wait()
		h.rt.Send(ctx, r, "lead", troupe.KindMessage, "a")
		var req troupe.Request
		done := make(chan struct{})
		go func() {
			req, _ = h.rt.Ask(ctx, r, "lead", "answer 42", 0)
			close(done)
		}()
		synctest.Wait()
		h.rt.Send(ctx, r, "lead", troupe.KindMessage, "b")
		<-done
		if req.Answer != "42" {
			t.Fatalf("ask answered %q, want 42 (its own turn's output)", req.Answer)
		}
		synctest.Wait()
		var turns []string
		for _, in := range h.eng.Inputs() {
			var texts []string
			for _, m := range in.Messages {
				texts = append(texts, m.Text)
			}
			turns = append(turns, strings.Join(texts, "+"))
		}
		want := "silent 1m then ok|a|answer 42|b"
		if got := strings.Join(turns, "|"); got != want {
			t.Fatalf("turns = %s, want %s", got, want)
		}
	})
}

func TestDelegationResultWakesTheDelegator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		_, err := h.rt.Send(t.Context(), key(p1, "lead"), troupe.Person, troupe.KindMessage,
			`tool delegate {"to":"researcher","task":"answer the result is 42"}`)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var got []string
		for _, in := range h.eng.Inputs() {
			m := in.Messages[0]
			got = append(got, fmt.Sprintf("%s<-%s:%s", m.To, m.From, m.Kind))
		}
		want := []string{"lead<-@person:message", "researcher<-lead:delegate", "lead<-researcher:result"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("turns = %v, want %v", got, want)
		}
		last := h.eng.Inputs()[2].Messages[0]
		if last.Text != "the result is 42" {
			t.Fatalf("result text = %q", last.Text)
		}
	})
}

func TestAgentCrashFailsTheTurnAndTheNextMessageRestartsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		r := key(p1, "researcher")
		req, err := h.rt.Ask(t.Context(), r, "lead", "die", 0)
		if err != nil {
			t.Fatal(err)
		}
		if req.State != troupe.ReqFailed || !strings.Contains(req.Error, "exit status 3") || !strings.Contains(req.Error, "researcher") {
			t.Fatalf("ask of a crashing agent = %+v; want failed, naming the agent and the exit", req)
		}
		synctest.Wait()
		if st, reason := h.rt.AgentState(r); st != troupe.StateFailed || !strings.Contains(reason, "exit status 3") {
			t.Fatalf("state = %s (%s), want failed with the reason", st, reason)
		}
		req, err = h.rt.Ask(t.Context(), r, "lead", "hello", 0)
		if err != nil || req.Answer != "echo: hello" {
			t.Fatalf("ask after crash = %+v, %v; want a restarted agent answering", req, err)
		}
		if h.eng.starts != 2 {
			t.Fatalf("engine started %d sessions, want 2", h.eng.starts)
		}
	})
}

func TestToolErrorsAreSentencesAnAgentCanActOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		tools := h.rt.Tools(key(p1, "lead"))
		for _, c := range []struct{ tool, args, want string }{
			{"ask_agent", `{"to":"ghost","question":"hi"}`, "the agents are lead, researcher"},
			{"ask_agent", `{"to":"lead","question":"hi"}`, "cannot message itself"},
			{"ask_agent", `{"to":"researcher"}`, `missing argument "question"`},
			{"ask_agent", `{"to":"researcher","question":"q","bogus":1}`, "unknown field"},
			{"send_message", `[1,2]`, "bad arguments"},
			{"reply", `{"text":"x"}`, "no question to answer"},
			{"nope", `{}`, "the tools are ask_agent"},
		} {
			_, err := tools.Call(t.Context(), c.tool, []byte(c.args))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: error %v, want it to say %q", c.tool, c.args, err, c.want)
			}
		}
		out, err := tools.Call(t.Context(), "list_agents", nil)
		if err != nil || !strings.Contains(out, `"name":"researcher"`) || !strings.Contains(out, `"you":true`) {
			t.Fatalf("list_agents = %s, %v", out, err)
		}
	})
}

// TestC1_TwoProjectsWithTheSameAgentIDsNeverCrossTalk: project B is a copy
// of A (same agent names). Concurrent asks and sends in both: every answer
// comes from the asker's own project, and no turn of one project ever holds
// a message of the other.
func TestC1_TwoProjectsWithTheSameAgentIDsNeverCrossTalk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pa, pb troupe.ProjectID = "pa", "pb"
		w := 10 * time.Minute
		teams := staticTeams{pa: {spec("lead", w), spec("researcher", w)}, pb: {spec("lead", w), spec("researcher", w)}}
		h := newHarness(t, teams, 0)
		var wg sync.WaitGroup
		for _, p := range []troupe.ProjectID{pa, pb} {
			for i := range 20 {
				wg.Go(func() {
					want := fmt.Sprintf("%s-%d", p, i)
					req, err := h.rt.Ask(t.Context(), key(p, "researcher"), "lead", "answer "+want, 0)
					if err != nil || req.Answer != want {
						t.Errorf("ask in %s = %+v, %v; want %s", p, req, err, want)
					}
					h.rt.Send(t.Context(), key(p, "lead"), "researcher", troupe.KindMessage, "note "+want)
				})
			}
		}
		wg.Wait()
		synctest.Wait()
		for _, in := range h.eng.Inputs() {
			for _, m := range in.Messages {
				_, proj, _ := strings.Cut(m.Text, " ")
				if !strings.HasPrefix(proj, string(m.Project)+"-") {
					t.Errorf("message %q delivered in project %s", m.Text, m.Project)
				}
			}
		}
		for _, p := range []troupe.ProjectID{pa, pb} {
			conv, _ := h.store.Conversation(t.Context(), p, inbox.Page{})
			for _, m := range conv {
				if m.Project != p || !m.State.Final() {
					t.Errorf("project %s conversation holds %+v", p, m)
				}
			}
		}
	})
}

// TestTeamChangeRestartsOnlyChangedAgents: a reload that changes one
// agent's definition gives that agent a new session at its next turn; the
// unchanged agent keeps its session; a removed agent's mail expires.
func TestTeamChangeRestartsOnlyChangedAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := twoAgents(10 * time.Minute)
		h := newHarness(t, teams, 0)
		ctx := t.Context()
		lead, res := key(p1, "lead"), key(p1, "researcher")
		h.rt.Ask(ctx, lead, troupe.Person, "hi", 0)
		h.rt.Ask(ctx, res, troupe.Person, "hi", 0)
		if h.eng.starts != 2 {
			t.Fatalf("starts = %d, want 2", h.eng.starts)
		}
		h.rt.TeamChanged(troupe.TeamChange{Project: p1, Changed: []troupe.AgentID{"researcher"}})
		h.rt.Ask(ctx, lead, troupe.Person, "again", 0)
		h.rt.Ask(ctx, res, troupe.Person, "again", 0)
		if h.eng.starts != 3 {
			t.Fatalf("starts after changing researcher = %d, want 3 (researcher restarted, lead kept)", h.eng.starts)
		}
		h.rt.Send(ctx, res, troupe.Person, troupe.KindMessage, "silent 1h then x")
		synctest.Wait()
		h.rt.Send(ctx, res, troupe.Person, troupe.KindMessage, "queued behind")
		synctest.Wait()
		teams[p1] = teams[p1][:1] // the registry drops the agent, then tells the runtime
		h.rt.TeamChanged(troupe.TeamChange{Project: p1, Removed: []troupe.AgentID{"researcher"}})
		synctest.Wait()
		conv, _ := h.store.Conversation(ctx, p1, inbox.Page{Agent: "researcher"})
		for _, m := range conv {
			if !m.State.Final() {
				t.Errorf("message %q of a removed agent is %s, want an end state", m.Text, m.State)
			}
		}
		if st, _ := h.rt.AgentState(res); st != troupe.StateStopped {
			t.Errorf("removed agent state = %s, want stopped", st)
		}
	})
}

// TestTurnWithoutOutputForAWindowIsCut: an engine that hangs (no output,
// no end of turn) has its turn cut after exactly its turn_timeout of
// silence: the message fails with the reason, the agent is failed, and the
// next message gets a new session. A turn that keeps producing output is
// never cut.
func TestTurnWithoutOutputForAWindowIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		ctx := t.Context()
		r := key(p1, "researcher")
		start := time.Now()
		m, _ := h.rt.Send(ctx, r, troupe.Person, troupe.KindMessage, "work 20m every 4m line then hang")
		<-time.After(29 * time.Minute)
		synctest.Wait()
		if st, _ := h.rt.AgentState(r); st != troupe.StateBusy {
			t.Fatalf("at 29m (9m after its last output) state = %s, want still busy", st)
		}
		<-time.After(time.Minute)
		synctest.Wait()
		st, reason := h.rt.AgentState(r)
		if st != troupe.StateFailed || !strings.Contains(reason, "no output for 10m0s") {
			t.Fatalf("at 30m state = %s (%s), want failed: turn cut", st, reason)
		}
		conv, _ := h.store.Conversation(ctx, p1, inbox.Page{Agent: "researcher"})
		if conv[0].ID != m.ID || conv[0].State != troupe.MsgFailed || !strings.Contains(conv[0].Reason, "turn_timeout") {
			t.Fatalf("message = %+v, want failed with the reason", conv[0])
		}
		if took := time.Since(start); took != 30*time.Minute {
			t.Fatalf("cut at %v, want 30m", took)
		}
		req, err := h.rt.Ask(ctx, r, troupe.Person, "answer back", 0)
		if err != nil || req.Answer != "back" || h.eng.starts != 2 {
			t.Fatalf("after the cut: %+v %v, %d sessions; want a new session answering", req, err, h.eng.starts)
		}
		h.rt.Send(ctx, r, troupe.Person, troupe.KindMessage, "work 3h every 9m chunk then done")
		<-time.After(4 * time.Hour)
		synctest.Wait()
		conv, _ = h.store.Conversation(ctx, p1, inbox.Page{Agent: "researcher"})
		if last := conv[len(conv)-1]; last.State != troupe.MsgDelivered {
			t.Fatalf("a turn with output every 9m for 3h ended %s (%s), want delivered", last.State, last.Reason)
		}
	})
}

// TestAColdSessionsFirstTurnHasTheStartsBound: a new session's first turn
// is not cut for its turn_timeout of silence before the agent's first
// event (a CLI finishes starting after its first prompt), only after
// StartTimeout; once the agent has spoken, its turn_timeout holds again,
// for the rest of that session.
func TestAColdSessionsFirstTurnHasTheStartsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Second), 0)
		ctx := t.Context()
		r := key(p1, "researcher")
		req, err := h.rt.Ask(ctx, r, troupe.Person, "silent 90s then warm", 0)
		if err != nil || req.State != troupe.ReqAnswered || req.Answer != "warm" {
			t.Fatalf("first turn silent 90s with a 10s window = %+v %v; want answered", req, err)
		}
		start := time.Now()
		req, err = h.rt.Ask(ctx, r, troupe.Person, "silent 90s then late", 0)
		if err != nil || req.State != troupe.ReqNoReply || !strings.Contains(req.Error, "10s") {
			t.Fatalf("second turn silent 90s = %+v %v; want no_reply after 10s", req, err)
		}
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("warm session's silent turn cut after %v, want 10s", took)
		}
		// The cut closed the session: the next one is cold again, and its
		// first turn is cut at StartTimeout when it never speaks.
		start = time.Now()
		req, err = h.rt.Ask(ctx, r, troupe.Person, "silent 1h then never", 0)
		if err != nil || req.State != troupe.ReqNoReply {
			t.Fatalf("cold turn silent for an hour = %+v %v; want no_reply", req, err)
		}
		if took := time.Since(start); took != StartTimeout {
			t.Errorf("cold silent turn cut after %v, want StartTimeout (%v)", took, StartTimeout)
		}
		synctest.Wait() // the ask's watchdog and the turn's fire at the same instant
		if st, reason := h.rt.AgentState(r); st != troupe.StateFailed || !strings.Contains(reason, "first turn of its new session") {
			t.Errorf("after the cold cut: %s (%s), want failed saying why", st, reason)
		}
		if h.eng.starts != 2 {
			t.Errorf("%d sessions started, want 2", h.eng.starts)
		}
	})
}

// TestAWaitingAskerIsNotCut: the lead's turn waits hours in ask_agent for a
// researcher that keeps working; the lead itself is silent meanwhile, yet
// its turn is not cut: a tool call in flight is not silence.
func TestAWaitingAskerIsNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "lead"), troupe.Person,
			`tool ask_agent {"to":"researcher","question":"work 2h every 9m line then found"}`, 0)
		if err != nil || req.State != troupe.ReqAnswered || req.Answer != "found" {
			t.Fatalf("ask through a waiting lead = %+v %v; want the researcher's answer", req, err)
		}
	})
}

// TestAskerWindowDiffersFromTargets (C4): an ask is held to its target's
// window, whatever the asker's own. A lead with a 1 min turn_timeout asks
// a researcher with 10 min who is silent 5 min: answered, and the lead's
// turn is not cut meanwhile. The other way round, a lead with 10 min asks
// a researcher with 1 min who is silent 5 min: no reply after about 1
// min, which the lead's turn gets as the tool's error.
func TestAskerWindowDiffersFromTargets(t *testing.T) {
	for _, c := range []struct {
		name            string
		asker, target   time.Duration
		answered        bool
		within, atLeast time.Duration
	}{
		{"short asker, long target", time.Minute, 10 * time.Minute, true, 6 * time.Minute, 5 * time.Minute},
		{"long asker, short target", 10 * time.Minute, time.Minute, false, 2 * time.Minute, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, staticTeams{p1: {spec("lead", c.asker), spec("researcher", c.target)}}, 0)
				start := time.Now()
				req, err := h.rt.Ask(t.Context(), key(p1, "lead"), troupe.Person,
					`tool ask_agent {"to":"researcher","question":"silent 5m then found"}`, 0)
				took := time.Since(start)
				if err != nil || req.State != troupe.ReqAnswered {
					t.Fatalf("the lead's turn = %+v %v, want it answered (not cut for its own silence)", req, err)
				}
				if got := req.Answer == "found"; got != c.answered {
					t.Errorf("the lead's turn ended with %q, want the researcher's answer: %v", req.Answer, c.answered)
				}
				if !c.answered && !strings.Contains(req.Answer, "no reply from researcher") {
					t.Errorf("the lead got %q, want the no reply naming the researcher", req.Answer)
				}
				if took < c.atLeast || took > c.within {
					t.Errorf("took %v, want between %v and %v", took, c.atLeast, c.within)
				}
			})
		})
	}
}
