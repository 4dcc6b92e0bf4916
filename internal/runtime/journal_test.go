package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestJournalKeepsEveryKindOfATurn: a turn that reports every kind of
// event is kept with the turn: its messages, the output chunks joined into
// one text entry, thinking, the tool call and its result, usage, the
// session id, both permission decisions in order, and its end with the
// final text and the turn's usage.
func TestJournalKeepsEveryKindOfATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		teams := twoAgents(10 * time.Minute)
		teams[p1][1].AllowedTools = []string{"Read"}
		h := newHarness(t, teams, 0)
		r := key(p1, "researcher")
		done := make(chan error, 1)
		go func() {
			_, err := h.rt.Ask(t.Context(), r, "lead", "rich sess-1", 0)
			done <- err
		}()
		synctest.Wait() // Bash waits on the person
		ps := h.rt.Permissions(p1)
		if len(ps) != 1 {
			t.Fatalf("pending permissions = %+v, want Bash's", ps)
		}
		if _, err := h.rt.Decide(t.Context(), ps[0].ID, false, "not in allowed_tools, says the person"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the writer gathers entries for journal.DefaultLinger
		synctest.Wait()         // then records them
		ts, err := h.journal.Turns(t.Context(), r, 0, 0)
		if err != nil || len(ts) != 1 {
			t.Fatalf("Turns = %+v, %v; want one turn", ts, err)
		}
		tr := ts[0]
		if len(tr.Messages) != 1 || tr.Messages[0].From != "lead" || tr.Messages[0].Kind != troupe.KindAsk || tr.Messages[0].Text != "rich sess-1" {
			t.Errorf("messages = %+v, want lead's ask", tr.Messages)
		}
		var kinds []string
		for _, ev := range tr.Events {
			kinds = append(kinds, string(ev.Kind))
		}
		want := "session output thinking tool_call tool_result usage permission permission"
		if got := strings.Join(kinds, " "); got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
		ev := tr.Events
		if ev[0].SessionID != "sess-1" || ev[1].Text != "hello world" || ev[2].Text != "let me see\nwhat to do" ||
			ev[3].Tool.Name != "Bash" || len(ev[3].Tool.Input) < 5000 || ev[3].Cut ||
			ev[4].Tool.ID != "c1" || !ev[4].Tool.IsError || ev[4].Tool.Output != "ok" ||
			ev[5].Usage.CostUSD != 0.25 || ev[6].Permission.Tool != "Read" || !ev[6].Permission.Allow ||
			ev[7].Permission.Allow || !strings.Contains(ev[7].Permission.Reason, "allowed_tools") {
			t.Errorf("events = %+v", ev)
		}
		if !tr.Ended() || tr.Text != "Read:true Bash:false" || tr.Error != "" || tr.Usage == nil || tr.Usage.InputTokens != 10 || tr.Dropped != 0 {
			t.Errorf("end = ended %v text %q error %q usage %+v dropped %d", tr.Ended(), tr.Text, tr.Error, tr.Usage, tr.Dropped)
		}
		// A failed turn is kept with its error.
		if req, _ := h.rt.Ask(t.Context(), r, "lead", "die", 0); req.State != troupe.ReqFailed {
			t.Fatalf("ask die = %+v", req)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		ts, _ = h.journal.Turns(t.Context(), r, 0, 0)
		if len(ts) != 2 || !strings.Contains(ts[0].Error, "crashed on purpose") {
			t.Errorf("newest turn = %+v, want the crash as its error", ts[0])
		}
	})
}

// TestTurnLogCoalescesAndCaps: output chunks become one text entry per run
// (a tool call between two runs makes two), a run or a text over
// journal.MaxText is cut with its original size stated, and a turn over
// journal.MaxTurnBytes keeps what fits and counts the rest.
func TestTurnLogCoalescesAndCaps(t *testing.T) {
	st := journal.NewMemStore()
	w := journal.NewWriter(journal.WriterOptions{Store: st, Queue: 1 << 20})
	k := key(p1, "dev")
	l := turnLog{w: w, key: k}
	l.start("t1", []troupe.Message{{ID: 7, From: troupe.Person, Kind: troupe.KindMessage, Text: strings.Repeat("m", journal.MaxText+1)}})
	for range 1000 {
		l.event(engine.Event{Kind: engine.EventOutput, Turn: "t1", Text: "chunk "})
	}
	l.event(engine.Event{Kind: engine.EventToolCall, Turn: "t1", Tool: &engine.ToolUse{ID: "1", Name: "Read", Input: []byte(`{}`)}})
	for range 200 {
		l.event(engine.Event{Kind: engine.EventOutput, Turn: "t1", Text: strings.Repeat("y", 1000)})
	}
	l.event(engine.Event{Kind: engine.EventThinking, Turn: "t1", Text: strings.Repeat("z", journal.MaxText+10)})
	l.event(engine.Event{Kind: engine.EventOutput, Turn: "other", Text: "a late event of another turn"})
	for range journal.MaxTurnBytes / journal.MaxText {
		l.event(engine.Event{Kind: engine.EventThinking, Turn: "t1", Text: strings.Repeat("w", journal.MaxText)})
	}
	l.end("t1", "final", "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w.Run(ctx) // drains

	tr, err := st.Turn(t.Context(), k, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if m := tr.Messages[0]; !m.Cut || len(m.Text) != journal.MaxText {
		t.Errorf("message: cut %v, %d bytes; want cut at %d", m.Cut, len(m.Text), journal.MaxText)
	}
	ev := tr.Events
	if ev[0].Kind != journal.KindOutput || ev[0].Text != strings.Repeat("chunk ", 1000) || ev[0].Cut {
		t.Errorf("first run = %q… (%d bytes, cut %v), want the 1000 chunks joined", ev[0].Text[:20], len(ev[0].Text), ev[0].Cut)
	}
	if ev[1].Kind != journal.KindToolCall || ev[2].Kind != journal.KindOutput || !ev[2].Cut || ev[2].Size != 200_000 || len(ev[2].Text) != journal.MaxText {
		t.Errorf("second run: kind %s, cut %v, size %d, %d bytes kept; want cut at %d of 200000", ev[2].Kind, ev[2].Cut, ev[2].Size, len(ev[2].Text), journal.MaxText)
	}
	if ev[3].Kind != journal.KindThinking || !ev[3].Cut || ev[3].Size != journal.MaxText+10 {
		t.Errorf("thinking: cut %v size %d", ev[3].Cut, ev[3].Size)
	}
	total := 0
	for _, e := range ev {
		total += e.Bytes()
		if strings.Contains(e.Text, "late") {
			t.Errorf("an event of another turn was kept in t1")
		}
	}
	if total > journal.MaxTurnBytes || tr.Dropped == 0 || tr.Text != "final" {
		t.Errorf("turn holds %d bytes of events, %d dropped, text %q; want at most %d and some dropped", total, tr.Dropped, tr.Text, journal.MaxTurnBytes)
	}
}

// TestTurnLogKeepsNotices: an engine's notice about the turn (an openai
// agent's oldest turns dropped to fit its context) is in the turn's record,
// between the outputs around it.
func TestTurnLogKeepsNotices(t *testing.T) {
	st := journal.NewMemStore()
	w := journal.NewWriter(journal.WriterOptions{Store: st, Queue: 1 << 10})
	k := key(p1, "dev")
	l := turnLog{w: w, key: k}
	l.start("t1", []troupe.Message{{ID: 1, From: troupe.Person, Kind: troupe.KindMessage, Text: "go"}})
	l.event(engine.Event{Kind: engine.EventOutput, Turn: "t1", Text: "before"})
	l.event(engine.Event{Kind: engine.EventNotice, Turn: "t1", Text: "dropped the 2 oldest turns"})
	l.event(engine.Event{Kind: engine.EventOutput, Turn: "t1", Text: "after"})
	l.end("t1", "after", "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w.Run(ctx)
	tr, err := st.Turn(t.Context(), k, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 3 || tr.Events[1].Kind != journal.KindNotice || tr.Events[1].Text != "dropped the 2 oldest turns" {
		t.Fatalf("events %+v", tr.Events)
	}
}
