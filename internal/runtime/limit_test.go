package runtime

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestUsageLimitIsAState: a turn that ends on its engine's usage limit
// fails nothing. The ask returns at once, detached, saying until when;
// the agent is limited with that reason; its message waits in its inbox
// and runs again when the limit resets, in a new session, without the
// person; then the request is answered and the agent idle.
func TestUsageLimitIsAState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		start := time.Now()
		req := askAsync(t.Context(), h, r, "limited 5m times 1 then done").wait(t)
		if req.State != troupe.ReqPending || !req.Detached || !req.LimitedUntil.Equal(start.Add(5*time.Minute)) || time.Since(start) != 0 {
			t.Fatalf("ask = %+v after %v; want pending, detached, limited until +5m, at once", req, time.Since(start))
		}
		synctest.Wait()
		if st, why := h.rt.AgentState(r); st != troupe.StateLimited || !strings.Contains(why, "limited until") || !strings.Contains(why, "usage limit reached") {
			t.Errorf("state %s (%s), want limited with the reset time and the engine's words", st, why)
		}
		if p, _ := h.store.Pending(t.Context(), r, 0); len(p) != 1 || !p[0].Redelivered {
			t.Errorf("inbox while limited: %+v, want the ask's message queued again", p)
		}
		// Mail that comes meanwhile waits too: nothing starts.
		if _, err := h.rt.Send(t.Context(), r, "lead", troupe.KindMessage, "also this"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if n := h.eng.startCount(); n != 1 {
			t.Errorf("%d sessions started while limited, want only the first", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		got, err := h.store.Request(t.Context(), p1, req.ID)
		if err != nil || got.State != troupe.ReqAnswered || got.Answer != "done" {
			t.Fatalf("after the reset: %+v, %v; want answered done", got, err)
		}
		if st, _ := h.rt.AgentState(r); st != troupe.StateIdle {
			t.Errorf("state after the reset: %s, want idle", st)
		}
		if n := h.eng.startCount(); n != 2 {
			t.Errorf("%d sessions started, want 2 (the one limited, the one after the reset)", n)
		}
	})
}

// TestUsageLimitAskWhileLimited: an ask sent to a limited agent returns
// at once with the reset time; it is answered after it.
func TestUsageLimitAskWhileLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		if _, err := h.rt.Send(t.Context(), r, "lead", troupe.KindMessage, "limited 10m times 1 then ok"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		req, err := h.rt.Ask(t.Context(), r, "lead", "answer 42", 0)
		if err != nil || req.State != troupe.ReqPending || req.LimitedUntil.IsZero() || time.Since(start) != 0 {
			t.Fatalf("ask of a limited agent = %+v, %v after %v; want pending with its reset, at once", req, err, time.Since(start))
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got, _ := h.store.Request(t.Context(), p1, req.ID); got.State != troupe.ReqAnswered || got.Answer != "42" {
			t.Errorf("after the reset: %+v, want answered 42", got)
		}
		// The detached ask's answer comes to the asker's inbox.
		conv, _ := h.store.Conversation(t.Context(), p1, inbox.Page{Agent: "lead"})
		if !slices.ContainsFunc(conv, func(m troupe.Message) bool {
			return m.To == "lead" && m.Kind == troupe.KindReply && m.Text == "42"
		}) {
			t.Errorf("lead's messages: %+v, want the reply 42", conv)
		}
	})
}

// TestUsageLimitBacksOff: a limit without a reset time waits 1 min, then
// 2, then 4; a reset time given is kept, but a limit that comes back at
// once waits at least the backoff.
func TestUsageLimitBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Hour), 0)
		r := key(p1, "researcher")
		start := time.Now()
		if _, err := h.rt.Send(t.Context(), r, "lead", troupe.KindMessage, "limited none times 3 then ok"); err != nil {
			t.Fatal(err)
		}
		var tries []time.Duration
		for range 100 {
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if n := h.eng.startCount(); n > len(tries) {
				tries = append(tries, time.Since(start).Truncate(time.Minute))
			}
			if st, _ := h.rt.AgentState(r); st == troupe.StateIdle {
				break
			}
		}
		want := []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute}
		if len(tries) != len(want) {
			t.Fatalf("sessions started at %v, want at %v", tries, want)
		}
		for i := range want {
			if tries[i] != want[i] {
				t.Errorf("sessions started at %v, want at %v", tries, want)
				break
			}
		}
	})
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		until time.Time
		n     int
		want  time.Duration
	}{
		{now.Add(3 * time.Hour), 1, 3 * time.Hour},
		{now.Add(-time.Hour), 1, minLimitWait},
		{now.Add(1000 * time.Hour), 1, engine.MaxLimitWait},
		{now.Add(10 * time.Second), 2, time.Minute},
		{now.Add(10 * time.Second), 3, 2 * time.Minute},
		{time.Time{}, 10, maxLimitBackoff},
	} {
		if got, why := limitWait(now, c.until, c.n); got != c.want || why == "" {
			t.Errorf("limitWait(reset %v, limit %d in a row) = %v (%s), want %v", c.until.Sub(now), c.n, got, why, c.want)
		}
	}
}

// TestAbandonedAskComesToTheInbox: an ask made through the ask tool by a
// turn that ends while the ask still waits (its engine's client gave up
// on the tool call: a tool-call limit shorter than troupe was told) is
// detached at that turn's end, so the answer comes to the asker's inbox
// and a later turn of it reads it, instead of going to a call nobody
// reads.
func TestAbandonedAskComesToTheInbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Hour), 0)
		lead := key(p1, "lead")
		if _, err := h.rt.Send(t.Context(), lead, troupe.Person, troupe.KindMessage, "silent 1m then done"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// The turn's client calls the ask tool, then stops reading.
		go h.rt.Tools(lead).Call(context.Background(), "ask_agent", []byte(`{"to":"researcher","question":"silent 5m then found it"}`))
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		var got bool
		for _, in := range h.eng.Inputs() {
			for _, m := range in.Messages {
				got = got || m.To == "lead" && m.Kind == troupe.KindReply && m.Text == "found it"
			}
		}
		if !got {
			t.Errorf("lead's turns never got the abandoned ask's answer (inputs %+v)", h.eng.Inputs())
		}
	})
}

// TestRestartEndsALimit: the person's restart of a limited agent ends the
// wait: its mail runs at once, in the same conversation.
func TestRestartEndsALimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, twoAgents(time.Minute), 0)
		r := key(p1, "researcher")
		req := askAsync(t.Context(), h, r, "limited 1h times 1 then done").wait(t)
		synctest.Wait()
		if st, _ := h.rt.AgentState(r); st != troupe.StateLimited {
			t.Fatalf("state %s, want limited", st)
		}
		if err := h.rt.Restart(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, _ := h.store.Request(t.Context(), p1, req.ID); got.State != troupe.ReqAnswered || got.Answer != "done" {
			t.Errorf("after the restart: %+v, want answered at once", got)
		}
	})
}

// callLimit answers a tenth of the client's limit early, at least 3 s and
// at most 5 s, never more than half of it.
func TestCallLimitMargin(t *testing.T) {
	for limit, want := range map[time.Duration]time.Duration{
		time.Hour: time.Hour - 15*time.Second, time.Minute: 48 * time.Second, 40 * time.Second: 32 * time.Second,
		15 * time.Second: 10 * time.Second, 12 * time.Second: 7 * time.Second, 4 * time.Second: 2 * time.Second,
	} {
		spec := troupe.AgentSpec{ToolTimeout: limit}
		if got := callLimit(limitedEngine{}, spec); got != want {
			t.Errorf("callLimit with a client limit of %v = %v, want %v", limit, got, want)
		}
	}
}

// limitedEngine's client cuts a tool call after the agent's tool_timeout.
type limitedEngine struct{ engine.Engine }

func (limitedEngine) ToolCallLimit(a troupe.AgentSpec) time.Duration { return a.ToolTimeout }
