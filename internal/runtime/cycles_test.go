package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func threeAgents() staticTeams {
	return staticTeams{p1: {spec("lead", 10*time.Minute), spec("researcher", 10*time.Minute), spec("critic", 10*time.Minute)}}
}

// askScript is the memEngine script that asks to the question q.
func askScript(to, q string) string {
	return fmt.Sprintf(`tool ask_agent {"to":%q,"question":%q}`, to, q)
}

// TestC13_DirectCycleRefusedAtOnce: the lead waits on the researcher, whose
// turn asks the lead back: that ask is refused at once with the cycle named,
// and the lead's ask is still answered (with the researcher's final text,
// which here carries the refusal).
func TestC13_DirectCycleRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", askScript("lead", "answer never"), 0)
		if err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("lead's ask = %+v, %v; want answered", req, err)
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("the cycle was refused after %v, want at once", took)
		}
		for _, want := range []string{"ask refused", "researcher → lead → researcher", "send_message", "reply"} {
			if !strings.Contains(req.Answer, want) {
				t.Errorf("answer %q does not say %q", req.Answer, want)
			}
		}
		// The refused ask was recorded nowhere: the lead got no ask.
		if conv, _ := h.store.Conversation(t.Context(), p1, inbox.Page{Agent: "lead"}); slices.ContainsFunc(conv, func(m troupe.Message) bool { return m.To == "lead" && m.Kind == troupe.KindAsk }) {
			t.Fatalf("the refused ask reached the lead's inbox: %+v", conv)
		}
	})
}

// TestC13_ThreeCycleNamesAllInOrder: lead → researcher → critic → lead.
func TestC13_ThreeCycleNamesAllInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, threeAgents(), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead",
			askScript("critic", askScript("lead", "answer never")), 0)
		if err != nil || req.State != troupe.ReqAnswered {
			t.Fatalf("lead's ask = %+v, %v; want answered", req, err)
		}
		if want := "critic → lead → researcher → critic"; !strings.Contains(req.Answer, want) {
			t.Fatalf("answer %q does not name the cycle %q", req.Answer, want)
		}
	})
}

// TestC13_ChainWithoutCycleWorks: lead → researcher → critic, nobody asks back.
func TestC13_ChainWithoutCycleWorks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, threeAgents(), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", askScript("critic", "answer deep"), 0)
		if err != nil || req.Answer != "deep" {
			t.Fatalf("chain = %+v, %v; want the critic's answer", req, err)
		}
		// And the person on top of a chain: person → lead → researcher → critic.
		req, err = h.rt.Ask(t.Context(), key(p1, "lead"), troupe.Person,
			askScript("researcher", askScript("critic", "answer deeper")), 0)
		if err != nil || req.Answer != "deeper" {
			t.Fatalf("chain from the person = %+v, %v; want the critic's answer", req, err)
		}
	})
}

// TestC13_ReverseAskAllowedOnceTheAskEnded: the researcher answers the
// lead, and its very next turn (queued behind the ask) asks the lead: the
// lead no longer waits, so that is no cycle.
func TestC13_ReverseAskAllowedOnceTheAskEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, threeAgents(), 0)
		var first troupe.Request
		var wg sync.WaitGroup
		wg.Go(func() {
			var err error
			first, err = h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "silent 1m then hi", 0)
			if err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the researcher is in the ask's turn
		del, err := h.rt.Delegate(t.Context(), key(p1, "researcher"), "critic", askScript("lead", "answer back"), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		synctest.Wait()
		if first.Answer != "hi" {
			t.Fatalf("lead's ask = %+v", first)
		}
		got, _ := h.store.Request(t.Context(), p1, del.ID)
		if got.State != troupe.ReqAnswered || got.Answer != "back" {
			t.Fatalf("the researcher's ask of the lead after answering it = %+v; want the lead's answer", got)
		}
	})
}

// TestC13_DetachedAskIsNoEdge: the lead's ask is detached after 1m (it
// carries on); the researcher, still on it, may then ask the lead.
func TestC13_DetachedAskIsNoEdge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		req, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "silent 5m then later", time.Minute)
		if err != nil || req.State != troupe.ReqPending || !req.Detached {
			t.Fatalf("ask with a 1m wait = %+v, %v; want detached", req, err)
		}
		back, err := h.rt.Ask(t.Context(), key(p1, "lead"), "researcher", "answer free", 0)
		if err != nil || back.Answer != "free" {
			t.Fatalf("reverse ask while the lead's ask is detached = %+v, %v; want answered", back, err)
		}
	})
}

// TestC13_DelegationsAreNeverRefused: the lead waits on the researcher,
// which delegates to the lead (no wait: fine) but cannot ask it.
func TestC13_DelegationsAreNeverRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(10*time.Minute), 0)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "silent 1m then hi", 0); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		if _, err := h.rt.Delegate(t.Context(), key(p1, "lead"), "researcher", "answer done", "", 0); err != nil {
			t.Fatalf("delegation against a waiting asker refused: %v", err)
		}
		if _, err := h.rt.Send(t.Context(), key(p1, "lead"), "researcher", troupe.KindMessage, "hello"); err != nil {
			t.Fatalf("send against a waiting asker refused: %v", err)
		}
		_, err := h.rt.Ask(t.Context(), key(p1, "lead"), "researcher", "answer never", 0)
		var ce *CycleError
		if !errors.As(err, &ce) || !errors.Is(err, troupe.ErrConflict) ||
			!slices.Equal(ce.Cycle, []troupe.AgentID{"researcher", "lead", "researcher"}) {
			t.Fatalf("ask back = %v; want a CycleError researcher → lead → researcher matching ErrConflict", err)
		}
		wg.Wait()
	})
}

// TestC13_C1_CopiedProjectsHaveTheirOwnGraph: p1 and its copy p2 have the
// same agent names; the lead of p1 waits on its researcher. In p2 the
// researcher may ask the lead; in p1 it may not.
func TestC13_C1_CopiedProjectsHaveTheirOwnGraph(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p2 troupe.ProjectID = "p2"
		teams := twoAgents(10 * time.Minute)
		teams[p2] = teams[p1]
		h := newHarness(t, teams, 0)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := h.rt.Ask(t.Context(), key(p1, "researcher"), "lead", "silent 1m then hi", 0); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		if req, err := h.rt.Ask(t.Context(), key(p2, "lead"), "researcher", "answer p2", 0); err != nil || req.Answer != "p2" {
			t.Fatalf("ask in the copy = %+v, %v; want answered (p1's wait is not p2's)", req, err)
		}
		if _, err := h.rt.Ask(t.Context(), key(p1, "lead"), "researcher", "answer p1", 0); !errors.Is(err, troupe.ErrConflict) {
			t.Fatalf("ask back in p1 = %v; want refused", err)
		}
		wg.Wait()
	})
}

// TestC13_ConcurrentCrossAsksOneRefused: x → y and y → x at the same time:
// exactly one is refused, the other is answered.
func TestC13_ConcurrentCrossAsksOneRefused(t *testing.T) {
	for i := range 20 {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, twoAgents(10*time.Minute), 0)
			pairs := [][2]string{{"lead", "researcher"}, {"researcher", "lead"}}
			if i%2 == 1 {
				pairs[0], pairs[1] = pairs[1], pairs[0]
			}
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for j, p := range pairs {
				wg.Go(func() {
					req, err := h.rt.Ask(t.Context(), key(p1, p[1]), troupe.AgentID(p[0]), "silent 1m then ok", 0)
					if err == nil && req.Answer != "ok" {
						err = fmt.Errorf("answered %+v", req)
					}
					errs[j] = err
				})
			}
			wg.Wait()
			refused := 0
			for _, err := range errs {
				switch {
				case errors.Is(err, troupe.ErrConflict):
					refused++
				case err != nil:
					t.Fatal(err)
				}
			}
			if refused != 1 {
				t.Fatalf("%d of two crossed asks refused (%v), want exactly one", refused, errs)
			}
		})
	}
}

// TestC13_WaitGraph: the graph alone: edges per project and per request,
// the person a source only, waits counted, ended and forgotten edges gone.
func TestC13_WaitGraph(t *testing.T) {
	g := newWaitGraph()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.wait(p1, "r1", troupe.Person, "lead"))
	must(g.wait(p1, "r2", "lead", "researcher"))
	must(g.wait(p1, "r3", "researcher", "critic"))
	must(g.wait(p1, "r1", troupe.Person, "lead")) // the person waits again on its ask
	err := g.wait(p1, "r4", "critic", "lead")
	var ce *CycleError
	if !errors.As(err, &ce) || !slices.Equal(ce.Cycle, []troupe.AgentID{"critic", "lead", "researcher", "critic"}) {
		t.Fatalf("critic → lead = %v, want the cycle critic → lead → researcher → critic", err)
	}
	must(g.wait("p2", "r5", "critic", "lead")) // another project
	g.ended(p1, "r3")
	must(g.wait(p1, "r6", "critic", "lead")) // researcher no longer waits on critic
	g.unwait(p1, "r6")
	g.unwait(p1, "r1")
	if e := g.projects[p1].edges["r1"]; e.n != 1 {
		t.Fatalf("the person's second wait on r1 ended the first: %+v", e)
	}
	g.forget(p1)
	g.unwait("p2", "r5")
	if len(g.projects) != 0 {
		t.Fatalf("graph not empty after every wait ended: %+v", g.projects)
	}
}
