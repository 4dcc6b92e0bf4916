package task

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

var _ Store = (*MemStore)(nil)

// MemStore is the in-memory Store: the reference implementation of the
// contract (tasktest.RunStore) and the store of tests. Its messages live in
// its own list (Messages), not in a runtime inbox. It is safe for
// concurrent use.
type MemStore struct {
	// mu guards every field below.
	mu      sync.Mutex
	tasks   map[ID]Task
	order   []ID // creation order
	msgs    []troupe.Message
	lastMsg int64
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{tasks: make(map[ID]Task)} }

// CheckNew validates a task given to Store.CreateTask. Stores call it, so
// that every implementation refuses the same things.
func CheckNew(t Task) error {
	switch {
	case t.ID == "":
		return fmt.Errorf("create task: empty id: %w", troupe.ErrInvalid)
	case t.Project == "" || t.Owner == "":
		return fmt.Errorf("create task %s: owner %q of project %q is not a project-qualified key: %w", t.ID, t.Owner, t.Project, troupe.ErrInvalid)
	case t.Command == "":
		return fmt.Errorf("create task %s: empty command: %w", t.ID, troupe.ErrInvalid)
	case t.State != "" && t.State != Running:
		return fmt.Errorf("create task %s: state %q, want %q: %w", t.ID, t.State, Running, troupe.ErrInvalid)
	}
	return nil
}

// CreateTask implements Store.
func (s *MemStore) CreateTask(_ context.Context, t Task) error {
	if err := CheckNew(t); err != nil {
		return err
	}
	t.State, t.Notified = Running, false
	t.EndedAt = time.Time{}
	if t.StartedAt.IsZero() {
		t.StartedAt = time.Now().UTC()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[t.ID]; ok {
		return fmt.Errorf("create task %s: %w", t.ID, troupe.ErrAlreadyExists)
	}
	s.tasks[t.ID] = t
	s.order = append(s.order, t.ID)
	return nil
}

// Task implements Store.
func (s *MemStore) Task(_ context.Context, p troupe.ProjectID, id ID) (Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok || t.Project != p {
		return Task{}, fmt.Errorf("find task %s: %w", id, troupe.ErrNotFound)
	}
	return t, nil
}

// Tasks implements Store.
func (s *MemStore) Tasks(_ context.Context, p troupe.ProjectID) ([]Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Task
	for _, id := range s.order {
		if t := s.tasks[id]; t.Project == p {
			out = append(out, t)
		}
	}
	return out, nil
}

// RunningTasks implements Store.
func (s *MemStore) RunningTasks(context.Context) ([]Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Task
	for _, id := range s.order {
		if t := s.tasks[id]; t.State == Running {
			out = append(out, t)
		}
	}
	return out, nil
}

// CheckCompletion validates Store.CompleteTask's arguments against the
// stored task t and fills msg's defaults (Project, To, Kind, From); it
// returns the message to store, whose ID, State and times the store still
// sets. Stores call it inside their transaction, so that every
// implementation refuses the same things.
func CheckCompletion(t Task, end Result, msg troupe.Message) (troupe.Message, error) {
	if !end.State.Final() {
		return msg, fmt.Errorf("complete task %s: end state %q is not final: %w", t.ID, end.State, troupe.ErrInvalid)
	}
	if msg.Project == "" {
		msg.Project = t.Project
	}
	if msg.To == "" {
		msg.To = t.Owner
	}
	if msg.Kind == "" {
		msg.Kind = troupe.KindTask
	}
	if msg.From == "" {
		msg.From = From
	}
	if msg.Key() != t.Key() {
		return msg, fmt.Errorf("complete task %s: message for %s, but the task belongs to %s: %w", t.ID, msg.Key(), t.Key(), troupe.ErrInvalid)
	}
	if msg.Kind != troupe.KindTask {
		return msg, fmt.Errorf("complete task %s: message of kind %q, want %q: %w", t.ID, msg.Kind, troupe.KindTask, troupe.ErrInvalid)
	}
	return msg, nil
}

// CompleteTask implements Store.
func (s *MemStore) CompleteTask(_ context.Context, id ID, end Result, msg troupe.Message) (troupe.Message, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return troupe.Message{}, false, fmt.Errorf("complete task %s: %w", id, troupe.ErrNotFound)
	}
	msg, err := CheckCompletion(t, end, msg)
	if err != nil {
		return troupe.Message{}, false, err
	}
	if t.State != Running {
		return troupe.Message{}, false, nil
	}
	now := time.Now().UTC()
	if end.EndedAt.IsZero() {
		end.EndedAt = now
	}
	t.State, t.ExitCode, t.Signal, t.Reason, t.EndedAt = end.State, end.ExitCode, end.Signal, end.Reason, end.EndedAt
	t.Notified = true
	s.tasks[id] = t

	s.lastMsg++
	msg.ID = s.lastMsg
	msg.Reason, msg.Turn, msg.Redelivered, msg.DoneAt = "", "", false, time.Time{}
	if msg.CreatedAt.IsZero() {
		msg.CreatedAt = now
	}
	msg.State = troupe.MsgQueued
	if msg.To == troupe.Person {
		msg.State, msg.DoneAt = troupe.MsgDelivered, now
	}
	s.msgs = append(s.msgs, msg)
	return msg, true, nil
}

// Messages lists the completion messages of project p in ID order.
func (s *MemStore) Messages(_ context.Context, p troupe.ProjectID) ([]troupe.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(s.msgs), func(m troupe.Message) bool { return m.Project != p }), nil
}
