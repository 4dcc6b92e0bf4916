package journal_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// blockedStore records into a MemStore, but each Record first says it
// started and waits to be released.
type blockedStore struct {
	*journal.MemStore
	entered chan int // the batch size of each Record, as it starts
	release chan struct{}

	mu      sync.Mutex // guards batches
	batches int
}

func (b *blockedStore) Record(ctx context.Context, es ...journal.Entry) error {
	b.entered <- len(es)
	<-b.release
	b.mu.Lock()
	b.batches++
	b.mu.Unlock()
	return b.MemStore.Record(ctx, es...)
}

var k = troupe.RuntimeKey{Project: "p1", Agent: "dev"}

func out(turn troupe.TurnID, text string) journal.Entry {
	return journal.Entry{Key: k, Turn: turn, Event: &journal.Event{At: time.Now(), Kind: journal.KindOutput, Text: text}}
}

// TestWriterCountsWhatItDrops: a store that falls behind never blocks Add;
// what the full queue could not take is counted per turn and recorded
// with the turn, so the record says how many events it is missing; Run
// drains the queue when its context ends.
func TestWriterCountsWhatItDrops(t *testing.T) {
	st := &blockedStore{MemStore: journal.NewMemStore(), entered: make(chan int), release: make(chan struct{})}
	w := journal.NewWriter(journal.WriterOptions{Store: st, Queue: 3, Chunk: 32})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	w.Add(journal.Entry{Key: k, Turn: "t1", Start: &journal.Start{At: time.Now()}})
	if n := <-st.entered; n != 1 { // the writer holds the start, blocked in Record
		t.Fatalf("first batch of %d entries, want 1", n)
	}
	for i := range 10 { // 3 fit in the queue, 7 are dropped; Add never blocks
		w.Add(out("t1", string(rune('a'+i))))
	}
	w.Add(out("t2", "other turn, dropped too"))
	close(st.release) // the store catches up
	if n := <-st.entered; n != 3+2 {
		t.Fatalf("second batch of %d entries, want the 3 queued and 2 counts of dropped", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got, err := st.Turn(t.Context(), k, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 3 || got.Events[0].Text != "a" || got.Dropped != 7 {
		t.Errorf("turn t1 kept %d events (first %q), %d dropped; want a, b, c and 7 dropped", len(got.Events), got.Events[0].Text, got.Dropped)
	}
	if other, err := st.Turn(t.Context(), k, "t2"); err != nil || other.Dropped != 1 {
		t.Errorf("turn t2 = %+v, %v; want 1 dropped", other, err)
	}
}

// TestWriterDrainsAtStop: entries queued when Run's context ends are
// recorded before Run returns.
func TestWriterDrainsAtStop(t *testing.T) {
	st := journal.NewMemStore()
	w := journal.NewWriter(journal.WriterOptions{Store: st})
	for i := range 100 {
		w.Add(out("t1", string(rune('a'+i%26))))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Turn(t.Context(), k, "t1")
	if err != nil || len(got.Events) != 100 || got.Dropped != 0 {
		t.Errorf("after drain: %d events, %d dropped, %v; want 100, 0", len(got.Events), got.Dropped, err)
	}
}

// TestWriterCountsFailedBatches: a batch the store refuses is counted as
// lost, and the writer goes on.
func TestWriterCountsFailedBatches(t *testing.T) {
	st := journal.NewMemStore()
	w := journal.NewWriter(journal.WriterOptions{Store: st})
	w.Add(journal.Entry{Key: k}) // invalid: no turn
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w.Run(ctx)
	if w.Lost() != 1 {
		t.Errorf("Lost = %d, want 1", w.Lost())
	}
}

// TestWriterSyncCutsTheLinger: Sync returns once what was added before it
// is recorded, without waiting out the writer's linger (an hour here, on
// fake time: the clock must not move), and at once when nothing is queued.
func TestWriterSyncCutsTheLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := journal.NewMemStore()
		w := journal.NewWriter(journal.WriterOptions{Store: st, Linger: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })

		start := time.Now()
		if err := w.Sync(ctx); err != nil {
			t.Fatalf("sync of nothing: %v", err)
		}
		w.Add(journal.Entry{Key: k, Turn: "t1", Start: &journal.Start{At: time.Now()}})
		w.Add(out("t1", "hello"))
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("sync waited %v of fake time, want the linger cut short", waited)
		}
		tr, err := st.Turn(ctx, k, "t1")
		if err != nil || len(tr.Events) != 1 || tr.Events[0].Text != "hello" {
			t.Errorf("after sync the store has %+v, %v; want the turn and its output", tr, err)
		}
		// Without Run, Sync ends with its context.
		idle := journal.NewWriter(journal.WriterOptions{Store: st})
		idle.Add(out("t2", "never recorded"))
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		if err := idle.Sync(sctx); err == nil {
			t.Error("sync with no Run returned nil")
		}
	})
}
