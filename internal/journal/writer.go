package journal

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Recorder is what a Writer needs of a store.
type Recorder interface {
	Record(ctx context.Context, entries ...Entry) error
}

// DefaultQueue is a Writer's queue bound when WriterOptions.Queue is 0.
const DefaultQueue = 4096

// DefaultChunk is how many entries a Writer records per transaction,
// when WriterOptions.Chunk is 0.
const DefaultChunk = 4

// DefaultLinger is how long a Writer gathers entries before it records
// them, when WriterOptions.Linger is 0.
const DefaultLinger = 100 * time.Millisecond

// WriterOptions configures a Writer. Store is required.
type WriterOptions struct {
	Store  Recorder
	Queue  int // entries queued at most; default DefaultQueue
	Logger *slog.Logger
	// DrainTimeout bounds the last Record when Run's context ends; default 5s.
	DrainTimeout time.Duration
	// Chunk bounds the entries of one Record (one transaction), so that a
	// big batch holds the store's writer for short spells and a turn's
	// commits can go in between; default DefaultChunk.
	Chunk int
	// Linger is how long the writer gathers entries after the first one
	// before recording them (sooner when half the queue is full), so that
	// a busy agent's many turns share a transaction and the store's writer
	// is rarely taken while a turn commits; default DefaultLinger.
	Linger time.Duration
}

// Writer takes entries off the turn's path: Add queues without blocking,
// Run records what is queued, one Store.Record (one transaction) per chunk
// of at most WriterOptions.Chunk entries.
// When the queue is full Add drops the entry and counts it for its turn;
// the next batch records the count (Entry.Dropped), so the turn's record
// says how many events it is missing. Safe for concurrent use.
type Writer struct {
	o   WriterOptions
	log *slog.Logger
	// poke wakes Run (capacity 1, coalesced); full cuts its linger short.
	poke chan struct{}
	full chan struct{}

	// mu guards the fields below.
	mu    sync.Mutex
	queue []Entry
	drops map[turnKey]int // entries not queued, per turn, not yet recorded
	lost  int             // entries whose Record failed (not kept, not in any count)
	// added counts the entries given to Add; done is the count the last
	// flush had taken, and flushed is closed (and replaced) after each
	// flush: Sync waits on them.
	added, done uint64
	flushed     chan struct{}
}

type turnKey struct {
	key  troupe.RuntimeKey
	turn troupe.TurnID
}

// NewWriter returns a writer; call Run to record.
func NewWriter(o WriterOptions) *Writer {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 5 * time.Second
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	return &Writer{o: o, log: o.Logger, poke: make(chan struct{}, 1), full: make(chan struct{}, 1), drops: map[turnKey]int{},
		flushed: make(chan struct{})}
}

// Add queues e for the next batch, or, when the queue is full, counts it
// as not kept. It never blocks on the store.
func (w *Writer) Add(e Entry) {
	w.mu.Lock()
	w.added++
	if len(w.queue) >= w.o.Queue {
		w.drops[turnKey{e.Key, e.Turn}] += max(1, e.Dropped)
		w.mu.Unlock()
		return
	}
	w.queue = append(w.queue, e)
	half := len(w.queue) >= w.o.Queue/2
	w.mu.Unlock()
	select {
	case w.poke <- struct{}{}:
	default:
	}
	if half {
		select {
		case w.full <- struct{}{}:
		default:
		}
	}
}

// Sync returns once every entry given to Add before it was called has
// been recorded (or counted lost), so that a read of the store after it
// sees them: a turn's log is readable as soon as the turn has ended. It
// cuts the writer's linger short; it returns ctx's error when ctx ends
// first (as it does when Run is not running).
func (w *Writer) Sync(ctx context.Context) error {
	w.mu.Lock()
	target := w.added
	for w.done < target {
		ch := w.flushed
		w.mu.Unlock()
		select {
		case w.full <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
	w.mu.Unlock()
	return nil
}

// Lost is how many entries the store refused or failed to record.
func (w *Writer) Lost() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// Run records batches until ctx ends, then records what is still queued
// (bounded by DrainTimeout) and returns nil. A batch being recorded when
// ctx ends is finished, not cancelled.
func (w *Writer) Run(ctx context.Context) error {
	for {
		select {
		case <-w.poke:
			if w.linger(ctx) {
				w.flush(context.WithoutCancel(ctx))
				continue
			}
		case <-ctx.Done():
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.o.DrainTimeout)
		defer cancel()
		w.flush(dctx)
		return nil
	}
}

// linger waits Linger, or until the queue is half full; false when ctx
// ended first.
func (w *Writer) linger(ctx context.Context) bool {
	t := time.NewTimer(w.o.Linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.full:
	case <-ctx.Done():
		return false
	}
	return true
}

// flush records the queue and the counts of dropped entries, in one batch.
func (w *Writer) flush(ctx context.Context) {
	w.mu.Lock()
	batch := w.queue
	w.queue = nil
	for k, n := range w.drops {
		batch = append(batch, Entry{Key: k.key, Turn: k.turn, Dropped: n})
	}
	clear(w.drops)
	upto := w.added
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.done = upto
		close(w.flushed)
		w.flushed = make(chan struct{})
		w.mu.Unlock()
	}()
	for len(batch) > 0 {
		chunk := batch[:min(len(batch), w.o.Chunk)]
		batch = batch[len(chunk):]
		if err := w.o.Store.Record(ctx, chunk...); err != nil {
			w.mu.Lock()
			w.lost += len(chunk)
			w.mu.Unlock()
			w.log.Error("record journal", "entries", len(chunk), "err", err)
		}
	}
}
