package journal

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// MemStore is a Store in memory: for tests, and the reference the SQLite
// store is checked against by journaltest. It applies the same caps and
// bounds; it is not durable.
type MemStore struct {
	// mu guards the fields below.
	mu     sync.Mutex
	seq    int64
	agents map[troupe.RuntimeKey][]*memTurn // oldest first
}

type memTurn struct {
	t     Turn
	bytes int64
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{agents: map[troupe.RuntimeKey][]*memTurn{}}
}

// Record implements Store.
func (s *MemStore) Record(ctx context.Context, entries ...Entry) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("record journal: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		if err := Check(e); err != nil {
			return err
		}
	}
	for _, e := range entries {
		s.recordLocked(e)
	}
	return nil
}

func (s *MemStore) recordLocked(e Entry) {
	ts := s.agents[e.Key]
	i := slices.IndexFunc(ts, func(t *memTurn) bool { return t.t.ID == e.Turn })
	if i < 0 {
		s.seq++
		at := e.At()
		if at.IsZero() {
			at = time.Now()
		}
		mt := &memTurn{t: Turn{Seq: s.seq, Project: e.Key.Project, Agent: e.Key.Agent, ID: e.Turn, StartedAt: at}}
		ts = append(ts, mt)
		i = len(ts) - 1
		if e.Start != nil {
			mt.t.Messages = slices.Clone(e.Start.Messages)
			mt.bytes += int64(e.Start.Bytes())
		}
		if e.Start != nil && mt.t.Seq%PruneEvery == 0 {
			if n := Prune(sizes(ts)); n > 0 {
				ts = slices.Delete(ts, 0, n)
				i -= n
			}
		}
		s.agents[e.Key] = ts
	}
	mt := ts[i]
	switch {
	case e.Start != nil: // a second start of the same turn: ignored
	case e.Event != nil:
		ev := *e.Event
		ev.Seq = len(mt.t.Events) + 1
		mt.t.Events = append(mt.t.Events, ev)
		mt.bytes += int64(ev.Bytes())
	case e.End != nil:
		mt.t.EndedAt, mt.t.Text, mt.t.TextCut, mt.t.Error = e.End.At, e.End.Text, e.End.TextCut, e.End.Error
		if e.End.Usage != nil {
			u := *e.End.Usage
			mt.t.Usage = &u
		}
		mt.bytes += int64(e.End.Bytes())
	}
	mt.t.Dropped += e.Dropped
}

func sizes(ts []*memTurn) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.bytes
	}
	return out
}

// Turns implements Store.
func (s *MemStore) Turns(ctx context.Context, k troupe.RuntimeKey, before int64, limit int) ([]Turn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read journal of %s: %w", k, err)
	}
	limit = Limit(limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.agents[k]
	var out []Turn
	for i := len(ts) - 1; i >= 0 && len(out) < limit; i-- {
		if before > 0 && ts[i].t.Seq >= before {
			continue
		}
		out = append(out, finish(ts[i].t))
	}
	return out, nil
}

// Turn implements Store.
func (s *MemStore) Turn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID) (Turn, error) {
	if err := ctx.Err(); err != nil {
		return Turn{}, fmt.Errorf("read journal of %s: %w", k, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.agents[k] {
		if t.t.ID == turn {
			return finish(t.t), nil
		}
	}
	return Turn{}, NotFound(k, turn)
}

// finish copies t for a reader and fills in what is derived.
func finish(t Turn) Turn {
	t.Messages = slices.Clone(t.Messages)
	t.Events = slices.Clone(t.Events)
	if t.Messages == nil {
		t.Messages = []Message{}
	}
	if t.Events == nil {
		t.Events = []Event{}
	}
	if t.Usage != nil {
		u := *t.Usage
		t.Usage = &u
	}
	return Finish(t)
}

// Finish fills in what a Turn derives from its fields (DurationMS); every
// store calls it on what it returns.
func Finish(t Turn) Turn {
	if t.Ended() {
		t.DurationMS = t.EndedAt.Sub(t.StartedAt).Milliseconds()
	}
	return t
}

// NotFound is the error for a turn that is not kept.
func NotFound(k troupe.RuntimeKey, turn troupe.TurnID) error {
	return fmt.Errorf("turn %s of %s is not in its journal (the newest %d turns are kept): %w", turn, k.Agent, MaxTurns, troupe.ErrNotFound)
}

// At is the time of the entry: its start's, event's or end's; zero for a
// count of dropped events.
func (e Entry) At() (at time.Time) {
	switch {
	case e.Start != nil:
		return e.Start.At
	case e.Event != nil:
		return e.Event.At
	case e.End != nil:
		return e.End.At
	}
	return time.Time{}
}

// Check refuses an entry no store can keep: every store calls it on each
// entry before recording any.
func Check(e Entry) error {
	n := 0
	for _, set := range []bool{e.Start != nil, e.Event != nil, e.End != nil} {
		if set {
			n++
		}
	}
	switch {
	case e.Key.Project == "" || e.Key.Agent == "" || e.Turn == "":
		return fmt.Errorf("record journal: entry without project, agent or turn: %w", troupe.ErrInvalid)
	case n > 1 || (n == 0 && e.Dropped <= 0):
		return fmt.Errorf("record journal entry of turn %s: set one of start, event and end (or only dropped): %w", e.Turn, troupe.ErrInvalid)
	case e.Dropped < 0:
		return fmt.Errorf("record journal entry of turn %s: dropped %d < 0: %w", e.Turn, e.Dropped, troupe.ErrInvalid)
	}
	return nil
}
