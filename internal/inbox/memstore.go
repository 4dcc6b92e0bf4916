package inbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// MemStore is a Store in memory: for tests (fake-time tests cannot wait on
// a database) and as the reference the SQLite store is checked against by
// the same contract suite. It is not durable.
type MemStore struct {
	// mu guards everything below.
	mu       sync.Mutex
	next     int64
	msgs     []troupe.Message // in ID order
	requests map[troupe.RequestID]troupe.Request
	reqMsg   map[troupe.RequestID]int64
	once     map[onceKey]int64 // AppendOnce's keys: the id of the message each stored
}

// onceKey is an idempotency key, scoped by project.
type onceKey struct {
	project troupe.ProjectID
	key     string
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{next: 1, requests: map[troupe.RequestID]troupe.Request{},
		reqMsg: map[troupe.RequestID]int64{}, once: map[onceKey]int64{}}
}

// storeLocked gives m the next ID and stores it as it is.
func (s *MemStore) storeLocked(m troupe.Message) troupe.Message {
	m.ID = s.next
	s.next++
	s.msgs = append(s.msgs, m)
	return m
}

// appendLocked admits m (Admit) and stores it.
func (s *MemStore) appendLocked(m troupe.Message) troupe.Message {
	return s.storeLocked(Admit(m, time.Now().UTC()))
}

// Append implements Store.
func (s *MemStore) Append(_ context.Context, m troupe.Message) (troupe.Message, error) {
	if err := CheckKey(m); err != nil {
		return troupe.Message{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendLocked(m), nil
}

// AppendOnce implements Store.
func (s *MemStore) AppendOnce(_ context.Context, key string, m troupe.Message) (troupe.Message, bool, error) {
	if err := CheckOnce(key, m); err != nil {
		return troupe.Message{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := onceKey{m.Project, key}
	if id, ok := s.once[k]; ok {
		return s.msgs[id-1], false, nil // ids are dense from 1
	}
	m = s.appendLocked(m)
	s.once[k] = m.ID
	return m, true, nil
}

// Ask implements Store.
func (s *MemStore) Ask(_ context.Context, r troupe.Request, m troupe.Message) (troupe.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.requests[r.ID]; ok {
		return troupe.Message{}, fmt.Errorf("record request %s: %w", r.ID, troupe.ErrAlreadyExists)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	r.State = troupe.ReqPending
	s.requests[r.ID] = r
	m = s.appendLocked(m)
	s.reqMsg[r.ID] = m.ID
	return m, nil
}

// Pending implements Store.
func (s *MemStore) Pending(_ context.Context, k troupe.RuntimeKey, limit int) ([]troupe.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []troupe.Message
	size := 0
	for _, m := range s.msgs {
		if limit > 0 && (len(out) == limit || size >= MaxPendingBytes) {
			break
		}
		if m.Key() == k && m.State == troupe.MsgQueued {
			out = append(out, m)
			size += len(m.Text)
		}
	}
	return out, nil
}

// StartTurn implements Store.
func (s *MemStore) StartTurn(_ context.Context, k troupe.RuntimeKey, ids []int64, turn troupe.TurnID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.Key() == k && m.State == troupe.MsgQueued && slices.Contains(ids, m.ID) {
			m.State, m.Turn = troupe.MsgInTurn, turn
		}
	}
	return nil
}

// EndTurn implements Store.
func (s *MemStore) EndTurn(_ context.Context, k troupe.RuntimeKey, turn troupe.TurnID, state troupe.MessageState, reason string, results []RequestResult) ([]Finished, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	for _, res := range results {
		if _, ok := s.requests[res.ID]; !ok {
			return nil, fmt.Errorf("end turn %s: request %s: %w", turn, res.ID, troupe.ErrNotFound)
		}
	}
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.Key() == k && m.State == troupe.MsgInTurn && m.Turn == turn {
			if state == troupe.MsgQueued {
				m.State, m.Reason, m.Turn, m.Redelivered = state, reason, "", true
				continue
			}
			m.State, m.Reason, m.DoneAt = state, reason, now
		}
	}
	var out []Finished
	for _, res := range results {
		if r := s.requests[res.ID]; res.Check && r.Verify != "" {
			if r.State == troupe.ReqPending && !r.Checking {
				r.Checking, r.Answer, r.Tried = true, res.Answer, r.Tried+1
				s.requests[res.ID] = r
				out = append(out, Finished{Request: r})
			}
			continue
		}
		r, queued, done := s.finishLocked(res.ID, res.State, res.Answer, res.Error)
		if done {
			out = append(out, Finished{Request: r, Queued: queued})
		}
	}
	return out, nil
}

// Expire implements Store.
func (s *MemStore) Expire(_ context.Context, k troupe.RuntimeKey, reason string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	now := time.Now().UTC()
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.Key() == k && (m.State == troupe.MsgQueued || m.State == troupe.MsgInTurn) {
			m.State, m.Reason, m.DoneAt = troupe.MsgExpired, reason, now
			n++
		}
	}
	return n, nil
}

// Recover implements Store.
func (s *MemStore) Recover(context.Context) ([]troupe.RuntimeKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []troupe.RuntimeKey
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.State == troupe.MsgInTurn {
			m.State, m.Redelivered, m.Turn = troupe.MsgQueued, true, ""
		}
		if m.State == troupe.MsgQueued && !slices.Contains(keys, m.Key()) {
			keys = append(keys, m.Key())
		}
	}
	return keys, nil
}

// Conversation implements Store. It walks from the bound the page starts
// at, so a page costs what it holds (other projects' messages aside).
func (s *MemStore) Conversation(_ context.Context, p troupe.ProjectID, q Page) ([]troupe.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []troupe.Message
	var fill Fill
	take := func(m troupe.Message) bool {
		if m.Project == p && q.Holds(m) {
			if !fill.Take(&m, len(m.Text)) {
				return false
			}
			out = append(out, m)
		}
		return len(out) < q.Size()
	}
	// IDs are dense from 1: message i has ID i+1.
	if !q.Newest {
		for i := max(q.After, 0); i < int64(len(s.msgs)); i++ {
			if !take(s.msgs[i]) {
				break
			}
		}
		return out, nil
	}
	hi := int64(len(s.msgs)) - 1
	if q.Before > 0 {
		hi = min(hi, q.Before-2)
	}
	for i := hi; i >= 0; i-- {
		if !take(s.msgs[i]) {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// Text implements Store.
func (s *MemStore) Text(_ context.Context, p troupe.ProjectID, id int64, offset int) (troupe.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 1 || id > int64(len(s.msgs)) || s.msgs[id-1].Project != p {
		return troupe.Message{}, fmt.Errorf("read message %d: %w", id, troupe.ErrNotFound)
	}
	m := s.msgs[id-1]
	text := ""
	if offset >= 0 && offset <= len(m.Text) {
		text = m.Text[offset:]
	}
	return Part(m, text, offset, len(m.Text))
}

// FinishRequest implements Store.
func (s *MemStore) FinishRequest(_ context.Context, id troupe.RequestID, state troupe.RequestState, answer, errText string) (troupe.Request, *troupe.Message, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.requests[id]; !ok {
		return troupe.Request{}, nil, false, fmt.Errorf("finish request %s: %w", id, troupe.ErrNotFound)
	}
	r, queued, done := s.finishLocked(id, state, answer, errText)
	return r, queued, done, nil
}

// finishLocked is FinishRequest with s.mu held, for a known id.
func (s *MemStore) finishLocked(id troupe.RequestID, state troupe.RequestState, answer, errText string) (troupe.Request, *troupe.Message, bool) {
	r := s.requests[id]
	if r.State != troupe.ReqPending {
		return r, nil, false
	}
	now := time.Now().UTC()
	r.State, r.Answer, r.Error, r.DoneAt, r.Checking = state, answer, errText, now, false
	s.requests[id] = r
	if state != troupe.ReqAnswered {
		for i := range s.msgs {
			if m := &s.msgs[i]; m.ID == s.reqMsg[id] && m.State == troupe.MsgQueued {
				m.State, m.Reason, m.DoneAt = troupe.MsgExpired, errText, now
			}
		}
	}
	m := s.storeLocked(Outcome(r, now))
	if m.State != troupe.MsgQueued {
		return r, nil, true
	}
	return r, &m, true
}

// Judge implements Store.
func (s *MemStore) Judge(_ context.Context, id troupe.RequestID, tried int, v troupe.Verdict, errText string, retry *troupe.Message) (Judged, error) {
	if retry != nil {
		if err := CheckKey(*retry); err != nil {
			return Judged{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return Judged{}, fmt.Errorf("judge request %s: %w", id, troupe.ErrNotFound)
	}
	if r.State != troupe.ReqPending || !r.Checking || r.Tried != tried {
		return Judged{}, nil
	}
	r.Checking, r.Verdict = false, &v
	s.requests[id] = r
	if retry != nil {
		m := s.appendLocked(*retry)
		return Judged{Retry: &m}, nil
	}
	state := troupe.ReqFailed
	if v.Passed() {
		state, errText = troupe.ReqAnswered, ""
	}
	r, queued, _ := s.finishLocked(id, state, r.Answer, errText)
	return Judged{Finished: &Finished{Request: r, Queued: queued}}, nil
}

// Detach implements Store.
func (s *MemStore) Detach(_ context.Context, id troupe.RequestID) (troupe.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return troupe.Request{}, fmt.Errorf("detach request %s: %w", id, troupe.ErrNotFound)
	}
	if r.State == troupe.ReqPending {
		r.Detached = true
		s.requests[id] = r
	}
	return r, nil
}

// Request implements Store.
func (s *MemStore) Request(_ context.Context, p troupe.ProjectID, id troupe.RequestID) (troupe.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || r.Project != p {
		return troupe.Request{}, fmt.Errorf("find request %s: %w", id, troupe.ErrNotFound)
	}
	return r, nil
}

// PendingRequests implements Store.
func (s *MemStore) PendingRequests(context.Context) ([]troupe.Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []troupe.Request
	for _, r := range s.requests {
		if r.State == troupe.ReqPending {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b troupe.Request) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// ExpireProject implements Store.
func (s *MemStore) ExpireProject(_ context.Context, p troupe.ProjectID, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	for i := range s.msgs {
		m := &s.msgs[i]
		if m.Project == p && (m.State == troupe.MsgQueued || m.State == troupe.MsgInTurn) {
			m.State, m.Reason, m.DoneAt = troupe.MsgExpired, reason, now
		}
	}
	for id, r := range s.requests {
		if r.Project == p && r.State == troupe.ReqPending {
			r.State, r.Error, r.DoneAt = troupe.ReqFailed, reason, now
			s.requests[id] = r
		}
	}
	return nil
}
