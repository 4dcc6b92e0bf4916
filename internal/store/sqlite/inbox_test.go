package sqlite

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/inbox/inboxtest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestInboxStoreContract(t *testing.T) {
	inboxtest.RunStore(t, func(t *testing.T) inbox.Store {
		return openTest(t, newPath(t)).Inbox()
	})
}

// TestInboxMigratesFromVersion1 opens a database written by a troupe that
// knew only schema version 1: Open adds the inbox tables and keeps the
// projects.
func TestInboxMigratesFromVersion1(t *testing.T) {
	ctx := t.Context()
	path := newPath(t)
	all := migrations
	t.Cleanup(func() { migrations = all })
	migrations = all[:1]
	old, err := Open(ctx, path, Options{})
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	p := troupe.Project{ID: "p1", Path: "/w/one", Name: "one", AddedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := old.Projects().AddProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db := openTest(t, path)
	var version int64
	if err := db.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil || version != int64(latestVersion()) {
		t.Fatalf("user_version = %d, %v; want %d", version, err, latestVersion())
	}
	if ps, err := db.Projects().Projects(ctx); err != nil || !slices.Equal(ps, []troupe.Project{p}) {
		t.Errorf("Projects after the migration = %v, %v; want [%v]", ps, err, p)
	}
	m, err := db.Inbox().Append(ctx, troupe.Message{Project: p.ID, To: "dev", From: troupe.Person, Kind: troupe.KindMessage, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.Inbox().Pending(ctx, m.Key(), 0); err != nil || len(got) != 1 || got[0].ID != m.ID {
		t.Errorf("Pending after the migration = %v, %v; want [%d]", got, err, m.ID)
	}
}

// TestInboxSurvivesReopen: what a turn left in flight when the store was
// closed comes back redelivered (C6), with every field as it was.
func TestInboxSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := newPath(t)
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := db.Inbox().Append(ctx, troupe.Message{Project: k.Project, To: k.Agent, From: "lead", Kind: troupe.KindMessage, Text: "do it"})
	if err != nil {
		t.Fatal(err)
	}
	req := troupe.Request{ID: "r1", Project: k.Project, From: "lead", To: k.Agent, Kind: troupe.KindAsk, Question: "why?"}
	askMsg, err := db.Inbox().Ask(ctx, req, troupe.Message{Project: k.Project, To: k.Agent, From: "lead", Kind: troupe.KindAsk, Text: "why?", Request: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Inbox().StartTurn(ctx, k, []int64{m.ID}, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, path)
	keys, err := db.Inbox().Recover(ctx)
	if err != nil || !slices.Equal(keys, []troupe.RuntimeKey{k}) {
		t.Fatalf("Recover after reopen = %v, %v; want [%v]", keys, err, k)
	}
	got, err := db.Inbox().Pending(ctx, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Redelivered = true
	askMsg.CreatedAt, m.CreatedAt = askMsg.CreatedAt.UTC(), m.CreatedAt.UTC()
	if want := []troupe.Message{m, askMsg}; !slices.Equal(got, want) {
		t.Errorf("Pending after reopen = %+v\nwant %+v", got, want)
	}
	rs, err := db.Inbox().PendingRequests(ctx)
	if err != nil || len(rs) != 1 || rs[0].ID != "r1" || rs[0].State != troupe.ReqPending {
		t.Errorf("PendingRequests after reopen = %+v, %v; want r1 pending", rs, err)
	}
}

// TestInboxReadsSeeCommittedWrites checks what the read pool gives the
// runtime: a read that starts after a write returned, in another
// goroutine, sees that write. The runtime relies on it when an actor reads
// its inbox after a wake, and when an asker reads its request after the
// finishing goroutine released it.
func TestInboxReadsSeeCommittedWrites(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx := t.Context()
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	type step struct {
		m   troupe.Message
		err error
	}
	written := make(chan step)
	for i := range 60 {
		go func() {
			m, err := db.Inbox().Append(ctx, troupe.Message{Project: k.Project, To: k.Agent, From: "lead", Kind: troupe.KindMessage, Text: "m"})
			if err == nil {
				err = db.Inbox().StartTurn(ctx, k, []int64{m.ID}, troupe.TurnID("t"+strconv.Itoa(i)))
			}
			written <- step{m, err}
		}()
		s := <-written
		if s.err != nil {
			t.Fatal(s.err)
		}
		conv, err := db.Inbox().Conversation(ctx, k.Project, inbox.Page{After: s.m.ID - 1, Limit: 1})
		if err != nil || len(conv) != 1 || conv[0].State != troupe.MsgInTurn {
			t.Fatalf("round %d: the read after Append and StartTurn returned = %+v, %v; want message %d in_turn", i, conv, err, s.m.ID)
		}
		if p, err := db.Inbox().Pending(ctx, k, 0); err != nil || len(p) != 0 {
			t.Fatalf("round %d: Pending after StartTurn returned = %v, %v; want none", i, p, err)
		}

		id := troupe.RequestID("r" + strconv.Itoa(i))
		go func() {
			_, err := db.Inbox().Ask(ctx, troupe.Request{ID: id, Project: k.Project, From: "lead", To: "qa", Kind: troupe.KindAsk, Question: "q"},
				troupe.Message{Project: k.Project, To: "qa", From: "lead", Kind: troupe.KindAsk, Text: "q", Request: id})
			if err == nil {
				_, _, _, err = db.Inbox().FinishRequest(ctx, id, troupe.ReqAnswered, "a", "")
			}
			written <- step{err: err}
		}()
		if s := <-written; s.err != nil {
			t.Fatal(s.err)
		}
		if r, err := db.Inbox().Request(ctx, k.Project, id); err != nil || r.State != troupe.ReqAnswered {
			t.Fatalf("round %d: Request after FinishRequest returned = %+v, %v; want answered", i, r, err)
		}
	}
}

func TestInboxRefusesTimesOutOfRange(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx := t.Context()
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	m := troupe.Message{Project: "p1", To: "dev", From: "lead", Kind: troupe.KindMessage, Text: "late", CreatedAt: far}
	if _, err := db.Inbox().Append(ctx, m); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("Append with CreatedAt in 2300: err = %v, want troupe.ErrInvalid", err)
	}
	r := troupe.Request{ID: "r1", Project: "p1", From: "lead", To: "dev", Kind: troupe.KindAsk, Question: "q", CreatedAt: far}
	m.CreatedAt = time.Time{}
	if _, err := db.Inbox().Ask(ctx, r, m); !errors.Is(err, troupe.ErrInvalid) {
		t.Errorf("Ask with CreatedAt in 2300: err = %v, want troupe.ErrInvalid", err)
	}
	if conv, err := db.Inbox().Conversation(ctx, "p1", inbox.Page{}); err != nil || len(conv) != 0 {
		t.Errorf("Conversation after the refusals = %v, %v; want none", conv, err)
	}
}

func TestInboxCanceledContext(t *testing.T) {
	db := openTest(t, newPath(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	m := troupe.Message{Project: "p1", To: "dev", From: "lead", Kind: troupe.KindMessage, Text: "m"}
	if _, err := db.Inbox().Append(ctx, m); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with a canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := db.Inbox().Pending(ctx, m.Key(), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Pending with a canceled context: err = %v, want context.Canceled", err)
	}
	if p, err := db.Inbox().Pending(t.Context(), m.Key(), 0); err != nil || len(p) != 0 {
		t.Errorf("Pending after the canceled Append = %v, %v; want none", p, err)
	}
}

func benchMessage(agent string) troupe.Message {
	return troupe.Message{Project: "p-bench", To: troupe.AgentID(agent), From: "lead", Kind: troupe.KindMessage,
		Text: "Please review the change to internal/runtime/actor.go and tell me whether the batch rule holds."}
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkInboxAppend measures one durable Append at a time: one
// transaction, one fsync (synchronous=FULL) per message.
func BenchmarkInboxAppend(b *testing.B) {
	db := openTest(b, newPath(b))
	m := benchMessage("dev")
	for b.Loop() {
		if _, err := db.Inbox().Append(b.Context(), m); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// BenchmarkInboxAppendParallel appends from at least 8 goroutines, each to
// its own inbox. The single writer connection serializes them: this shows
// the store's throughput under contention, not a speed-up.
func BenchmarkInboxAppendParallel(b *testing.B) {
	db := openTest(b, newPath(b))
	procs := goruntime.GOMAXPROCS(0)
	b.SetParallelism((8 + procs - 1) / procs)
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		m := benchMessage("dev" + strconv.FormatInt(next.Add(1), 10))
		for pb.Next() {
			if _, err := db.Inbox().Append(b.Context(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b)
}

// BenchmarkInboxCycle is one message's whole life in its inbox: Append,
// Pending, StartTurn, EndTurn (three commits and a read).
func BenchmarkInboxCycle(b *testing.B) {
	db := openTest(b, newPath(b))
	ctx := b.Context()
	m := benchMessage("dev")
	k := m.Key()
	i := 0
	for b.Loop() {
		i++
		if _, err := db.Inbox().Append(ctx, m); err != nil {
			b.Fatal(err)
		}
		pending, err := db.Inbox().Pending(ctx, k, 0)
		if err != nil || len(pending) != 1 {
			b.Fatalf("Pending = %d messages, %v; want 1", len(pending), err)
		}
		turn := troupe.TurnID("t" + strconv.Itoa(i))
		if err := db.Inbox().StartTurn(ctx, k, []int64{pending[0].ID}, turn); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Inbox().EndTurn(ctx, k, turn, troupe.MsgDelivered, "", nil); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// TestGroupCommitEachAppendDurableWithItsOwnID: concurrent Appends share
// transactions, yet each returns its own message with a distinct ID, and
// every one of them is there after the store is closed and reopened.
func TestGroupCommitEachAppendDurableWithItsOwnID(t *testing.T) {
	ctx := t.Context()
	path := newPath(t)
	db := openTest(t, path)
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	const n = 64
	got := make([]troupe.Message, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m, err := db.Inbox().Append(ctx, troupe.Message{Project: k.Project, To: k.Agent, From: "lead", Kind: troupe.KindMessage, Text: fmt.Sprint(i)})
			if err != nil {
				t.Error(err)
			}
			got[i] = m
		})
	}
	wg.Wait()
	ids := map[int64]string{}
	for i, m := range got {
		if m.Text != fmt.Sprint(i) || m.ID == 0 {
			t.Fatalf("append %d returned %+v", i, m)
		}
		if prev, dup := ids[m.ID]; dup {
			t.Fatalf("id %d returned for %q and %q", m.ID, prev, m.Text)
		}
		ids[m.ID] = m.Text
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, path)
	pending, err := db.Inbox().Pending(ctx, k, 0)
	if err != nil || len(pending) != n {
		t.Fatalf("after reopen: %d pending, %v; want %d", len(pending), err, n)
	}
	for _, m := range pending {
		if ids[m.ID] != m.Text {
			t.Errorf("stored message %d = %q, but Append returned that id for %q", m.ID, m.Text, ids[m.ID])
		}
	}
}

// TestPendingReadsTheInboxIndexInOrder: Pending is a range of
// messages_inbox read in id order and stopped by its LIMIT — no sort of
// the whole queue — and with 10,000 queued it returns the oldest 100.
func TestPendingReadsTheInboxIndexInOrder(t *testing.T) {
	ctx := t.Context()
	db := openTest(t, newPath(t))
	rows, err := db.r.QueryContext(ctx, `EXPLAIN QUERY PLAN `+pendingQuery, "p1", "dev", 100)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	rows.Close()
	joined := fmt.Sprint(plan)
	if !strings.Contains(joined, "USING INDEX messages_inbox") || strings.Contains(joined, "TEMP B-TREE") {
		t.Errorf("plan of Pending = %q, want a search of messages_inbox with no sort", plan)
	}
	k := troupe.RuntimeKey{Project: "p1", Agent: "dev"}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 10000; i += 8 {
				if _, err := db.Inbox().Append(ctx, troupe.Message{Project: k.Project, To: k.Agent, From: "lead", Kind: troupe.KindMessage, Text: strconv.Itoa(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := db.Inbox().Pending(ctx, k, 100)
	if err != nil || len(got) != 100 {
		t.Fatalf("Pending(dev, 100) = %d messages, %v; want 100", len(got), err)
	}
	all, _ := db.Inbox().Pending(ctx, k, 0)
	for i := range got {
		if got[i].ID != all[i].ID {
			t.Fatalf("Pending(dev, 100)[%d] = %d, want %d: the oldest, in order", i, got[i].ID, all[i].ID)
		}
	}
}
