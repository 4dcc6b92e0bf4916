// Package journaltest is the contract suite of journal.Store: Run holds
// every implementation (MemStore, the SQLite store) to the same behaviour.
// Only tests import it.
package journaltest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Run runs the contract against the stores open returns: a new, empty
// store per subtest, cleaned up with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) journal.Store) {
	t.Helper()
	t.Run("TurnRoundTrip", func(t *testing.T) { testTurnRoundTrip(t, open(t)) })
	t.Run("NewestFirstAndCursor", func(t *testing.T) { testNewestFirst(t, open(t)) })
	t.Run("KeyedByProjectAndAgent", func(t *testing.T) { testKeyed(t, open(t)) })
	t.Run("MissingStartAndDropped", func(t *testing.T) { testMissingStart(t, open(t)) })
	t.Run("SecondStartIgnored", func(t *testing.T) { testSecondStart(t, open(t)) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, open(t)) })
	t.Run("InvalidEntriesRefused", func(t *testing.T) { testInvalid(t, open(t)) })
	t.Run("PrunesBeyondMaxTurns", func(t *testing.T) { testPruneTurns(t, open(t)) })
	t.Run("PrunesBeyondMaxAgentBytes", func(t *testing.T) { testPruneBytes(t, open(t)) })
	t.Run("ConcurrentRecords", func(t *testing.T) { testConcurrent(t, open(t)) })
}

var base = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

func key(p, a string) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: troupe.ProjectID(p), Agent: troupe.AgentID(a)}
}

func start(k troupe.RuntimeKey, turn string, at time.Time, texts ...string) journal.Entry {
	s := &journal.Start{At: at}
	for i, text := range texts {
		s.Messages = append(s.Messages, journal.Message{ID: int64(i + 1), From: troupe.Person, Kind: troupe.KindMessage, Text: text})
	}
	return journal.Entry{Key: k, Turn: troupe.TurnID(turn), Start: s}
}

func event(k troupe.RuntimeKey, turn string, ev journal.Event) journal.Entry {
	return journal.Entry{Key: k, Turn: troupe.TurnID(turn), Event: &ev}
}

func end(k troupe.RuntimeKey, turn string, at time.Time, text, errText string) journal.Entry {
	return journal.Entry{Key: k, Turn: troupe.TurnID(turn), End: &journal.End{At: at, Text: text, Error: errText}}
}

func record(t *testing.T, s journal.Store, es ...journal.Entry) {
	t.Helper()
	if err := s.Record(t.Context(), es...); err != nil {
		t.Fatalf("Record: %v", err)
	}
}

func testTurnRoundTrip(t *testing.T, s journal.Store) {
	k := key("p1", "dev")
	u := &journal.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 7, CacheWriteTokens: 3, CostUSD: 0.0125}
	events := []journal.Event{
		{At: base.Add(1), Kind: journal.KindSession, SessionID: "sess-1"},
		{At: base.Add(2), Kind: journal.KindThinking, Text: "first I look\nthen I act"},
		{At: base.Add(3), Kind: journal.KindOutput, Text: "hello ", Cut: true, Size: 99999},
		{At: base.Add(4), Kind: journal.KindToolCall, Tool: &journal.Tool{ID: "c1", Name: "Bash", Input: `{"command":"ls"}`}},
		{At: base.Add(5), Kind: journal.KindToolResult, Tool: &journal.Tool{ID: "c1", Output: "a\nb", IsError: true}},
		{At: base.Add(6), Kind: journal.KindPermission, Permission: &journal.Permission{ID: "p1", Tool: "Edit", Title: "edit x", Input: `{}`, Reason: "no"}},
		{At: base.Add(7), Kind: journal.KindUsage, Usage: u},
	}
	es := []journal.Entry{start(k, "t1", base, "do it", "and this")}
	for _, ev := range events {
		es = append(es, event(k, "t1", ev))
	}
	e := end(k, "t1", base.Add(1500*time.Millisecond), "done", "")
	e.End.Usage, e.End.TextCut = u, true
	// Two calls: one transaction or several, the record is the same.
	record(t, s, es[:3]...)
	record(t, s, append(es[3:], e, journal.Entry{Key: k, Turn: "t1", Dropped: 2})...)

	got, err := s.Turn(t.Context(), k, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "t1" || got.Project != "p1" || got.Agent != "dev" || !got.StartedAt.Equal(base) || !got.EndedAt.Equal(base.Add(1500*time.Millisecond)) {
		t.Errorf("turn = %+v", got)
	}
	if got.DurationMS != 1500 || got.Text != "done" || !got.TextCut || got.Error != "" || got.Dropped != 2 || got.Usage == nil || *got.Usage != *u {
		t.Errorf("end of turn = duration %d text %q cut %v error %q dropped %d usage %+v", got.DurationMS, got.Text, got.TextCut, got.Error, got.Dropped, got.Usage)
	}
	if len(got.Messages) != 2 || got.Messages[1].Text != "and this" || got.Messages[1].From != troupe.Person || got.Messages[1].ID != 2 {
		t.Errorf("messages = %+v", got.Messages)
	}
	if len(got.Events) != len(events) {
		t.Fatalf("events = %+v, want %d", got.Events, len(events))
	}
	for i, want := range events {
		want.Seq = i + 1
		if g := got.Events[i]; fmt.Sprintf("%+v %+v %+v %+v", g.Tool, g.Usage, g.Permission, g.At.UTC()) != fmt.Sprintf("%+v %+v %+v %+v", want.Tool, want.Usage, want.Permission, want.At) ||
			g.Seq != want.Seq || g.Kind != want.Kind || g.Text != want.Text || g.SessionID != want.SessionID || g.Cut != want.Cut || g.Size != want.Size {
			t.Errorf("event %d = %+v, want %+v", i, g, want)
		}
	}
	ts, err := s.Turns(t.Context(), k, 0, 0)
	if err != nil || len(ts) != 1 || len(ts[0].Events) != len(events) || ts[0].Seq != got.Seq {
		t.Errorf("Turns = %+v, %v; want the one turn with its events", ts, err)
	}
}

func testNewestFirst(t *testing.T, s journal.Store) {
	k := key("p1", "dev")
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		record(t, s, start(k, id, base.Add(time.Duration(i)*time.Second), "m"), end(k, id, base.Add(time.Duration(i)*time.Second+time.Millisecond), "r", ""))
	}
	ts, err := s.Turns(t.Context(), k, 0, 2)
	if err != nil || len(ts) != 2 || ts[0].ID != "t4" || ts[1].ID != "t3" {
		t.Fatalf("Turns(limit 2) = %v, %v; want t4, t3", ids(ts), err)
	}
	if ts[0].Seq <= ts[1].Seq {
		t.Errorf("seq %d then %d, want newest highest", ts[0].Seq, ts[1].Seq)
	}
	more, err := s.Turns(t.Context(), k, ts[1].Seq, 10)
	if err != nil || strings.Join(ids(more), ",") != "t2,t1,t0" {
		t.Errorf("Turns(before t3) = %v, %v; want t2, t1, t0", ids(more), err)
	}
	if none, err := s.Turns(t.Context(), key("p1", "nobody"), 0, 0); err != nil || len(none) != 0 {
		t.Errorf("Turns of an agent without turns = %v, %v; want none", none, err)
	}
}

func ids(ts []journal.Turn) []string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t.ID))
	}
	return out
}

// C1: the same agent id and turn id in two projects are two records.
func testKeyed(t *testing.T, s journal.Store) {
	a, b := key("p1", "dev"), key("p2", "dev")
	record(t, s, start(a, "t1", base, "for p1"), start(b, "t1", base, "for p2"),
		event(a, "t1", journal.Event{At: base, Kind: journal.KindOutput, Text: "p1 out"}))
	ga, err1 := s.Turn(t.Context(), a, "t1")
	gb, err2 := s.Turn(t.Context(), b, "t1")
	if err1 != nil || err2 != nil || ga.Messages[0].Text != "for p1" || gb.Messages[0].Text != "for p2" || len(ga.Events) != 1 || len(gb.Events) != 0 {
		t.Errorf("p1 turn = %+v (%v), p2 turn = %+v (%v)", ga, err1, gb, err2)
	}
	if _, err := s.Turn(t.Context(), key("p1", "lead"), "t1"); !errors.Is(err, troupe.ErrNotFound) {
		t.Errorf("Turn of another agent = %v, want ErrNotFound", err)
	}
}

func testMissingStart(t *testing.T, s journal.Store) {
	k := key("p1", "dev")
	record(t, s, event(k, "t1", journal.Event{At: base, Kind: journal.KindOutput, Text: "late"}),
		journal.Entry{Key: k, Turn: "t1", Dropped: 3}, end(k, "t1", base.Add(time.Second), "", "boom"))
	got, err := s.Turn(t.Context(), k, "t1")
	if err != nil || !got.StartedAt.Equal(base) || len(got.Messages) != 0 || len(got.Events) != 1 || got.Dropped != 3 || got.Error != "boom" {
		t.Errorf("turn without start = %+v, %v", got, err)
	}
	if got.Messages == nil || got.Events == nil {
		t.Errorf("messages %v and events %v must be empty lists, not null", got.Messages, got.Events)
	}
}

func testSecondStart(t *testing.T, s journal.Store) {
	k := key("p1", "dev")
	record(t, s, start(k, "t1", base, "first"))
	record(t, s, start(k, "t1", base.Add(time.Hour), "second"))
	got, err := s.Turn(t.Context(), k, "t1")
	if err != nil || got.Messages[0].Text != "first" || !got.StartedAt.Equal(base) {
		t.Errorf("turn = %+v, %v; want the first start kept", got, err)
	}
	if ts, _ := s.Turns(t.Context(), k, 0, 0); len(ts) != 1 {
		t.Errorf("%d turns, want 1", len(ts))
	}
}

func testNotFound(t *testing.T, s journal.Store) {
	_, err := s.Turn(t.Context(), key("p1", "dev"), "nope")
	if !errors.Is(err, troupe.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Turn(nope) = %v, want ErrNotFound naming the turn", err)
	}
}

func testInvalid(t *testing.T, s journal.Store) {
	k := key("p1", "dev")
	for name, e := range map[string]journal.Entry{
		"no turn":  {Key: k, Start: &journal.Start{At: base}},
		"no agent": {Key: troupe.RuntimeKey{Project: "p1"}, Turn: "t", Start: &journal.Start{At: base}},
		"nothing":  {Key: k, Turn: "t"},
		"two":      {Key: k, Turn: "t", Start: &journal.Start{At: base}, End: &journal.End{At: base}},
	} {
		// A bad entry fails the whole call: the good one is not recorded.
		if err := s.Record(t.Context(), start(k, "good", base), e); !errors.Is(err, troupe.ErrInvalid) {
			t.Errorf("Record(%s) = %v, want ErrInvalid", name, err)
		}
	}
	if ts, _ := s.Turns(t.Context(), k, 0, 0); len(ts) != 0 {
		t.Errorf("a failed Record kept %v", ids(ts))
	}
}

func testPruneTurns(t *testing.T, s journal.Store) {
	k, other := key("p1", "dev"), key("p1", "lead")
	record(t, s, start(other, "o1", base))
	n := journal.MaxTurns + 2*journal.PruneEvery
	var es []journal.Entry
	for i := range n {
		es = append(es, start(k, fmt.Sprintf("t%03d", i), base.Add(time.Duration(i)*time.Second)))
	}
	record(t, s, es...)
	ts, err := s.Turns(t.Context(), k, 0, journal.MaxTurns)
	if err != nil || len(ts) != journal.MaxTurns || ts[0].ID != troupe.TurnID(fmt.Sprintf("t%03d", n-1)) {
		t.Fatalf("Turns = %d turns from %v, %v; want the newest %d", len(ts), ids(ts[:1]), err, journal.MaxTurns)
	}
	// Pruned every PruneEvery turns: at most PruneEvery-1 over the bound.
	kept := 0
	for i := range n {
		if _, err := s.Turn(t.Context(), k, troupe.TurnID(fmt.Sprintf("t%03d", i))); err == nil {
			kept++
		}
	}
	if kept < journal.MaxTurns || kept >= journal.MaxTurns+journal.PruneEvery {
		t.Errorf("after %d turns %d are kept, want %d to %d", n, kept, journal.MaxTurns, journal.MaxTurns+journal.PruneEvery-1)
	}
	if _, err := s.Turn(t.Context(), other, "o1"); err != nil {
		t.Errorf("another agent's turn was pruned: %v", err)
	}
}

func testPruneBytes(t *testing.T, s journal.Store) {
	k := key("p1", "dev")
	big := strings.Repeat("x", journal.MaxText)
	perTurn := 0
	turns := 0
	for perTurn*turns <= journal.MaxAgentBytes+2*perTurn {
		id := fmt.Sprintf("t%03d", turns)
		es := []journal.Entry{start(k, id, base)}
		n := 0
		for n < 4<<20 {
			ev := journal.Event{At: base, Kind: journal.KindOutput, Text: big}
			es = append(es, event(k, id, ev))
			n += ev.Bytes()
		}
		perTurn = n
		record(t, s, es...)
		turns++
	}
	// Pruning happens when a turn starts (every PruneEvery turns).
	for i := range journal.PruneEvery {
		record(t, s, start(k, fmt.Sprintf("last%02d", i), base))
	}
	ts, err := s.Turns(t.Context(), k, 0, journal.MaxTurns)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for _, tr := range ts {
		for _, ev := range tr.Events {
			total += ev.Bytes()
		}
	}
	if total > journal.MaxAgentBytes || len(ts) >= turns+journal.PruneEvery || ts[0].ID != troupe.TurnID(fmt.Sprintf("last%02d", journal.PruneEvery-1)) {
		t.Errorf("kept %d of %d turns holding %d bytes, want at most %d bytes", len(ts), turns+journal.PruneEvery, total, journal.MaxAgentBytes)
	}
}

func testConcurrent(t *testing.T, s journal.Store) {
	var wg sync.WaitGroup
	for i := range 8 {
		k := key("p1", fmt.Sprintf("a%d", i))
		wg.Go(func() {
			for j := range 10 {
				id := fmt.Sprintf("t%d", j)
				if err := s.Record(t.Context(), start(k, id, base), event(k, id, journal.Event{At: base, Kind: journal.KindOutput, Text: "x"}),
					end(k, id, base, "ok", "")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		ts, err := s.Turns(t.Context(), key("p1", fmt.Sprintf("a%d", i)), 0, 0)
		if err != nil || len(ts) != 10 {
			t.Errorf("agent a%d: %d turns, %v; want 10", i, len(ts), err)
		}
	}
}
