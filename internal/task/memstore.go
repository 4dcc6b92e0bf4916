package task

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

var _ Store = (*MemStore)(nil)

// MemStore is the in-memory Store: the reference implementation of the
// contract (tasktest.RunStore) and the store of tests. It holds tasks
// only: their completion messages go to an Inbox. It is safe for
// concurrent use.
type MemStore struct {
	// mu guards every field below.
	mu    sync.Mutex
	tasks map[ID]Task
	order []ID // creation order
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
	t.State, t.Notified, t.MessageID = Running, false, 0
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

// CheckEnd validates Store.CompleteTask's arguments for task id. Stores
// call it, so that every implementation refuses the same things.
func CheckEnd(id ID, end Result, msgID int64) error {
	if !end.State.Final() {
		return fmt.Errorf("complete task %s: end state %q is not final: %w", id, end.State, troupe.ErrInvalid)
	}
	if msgID <= 0 {
		return fmt.Errorf("complete task %s: completion message id %d: %w", id, msgID, troupe.ErrInvalid)
	}
	return nil
}

// CompleteTask implements Store.
func (s *MemStore) CompleteTask(_ context.Context, id ID, end Result, msgID int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return false, fmt.Errorf("complete task %s: %w", id, troupe.ErrNotFound)
	}
	if err := CheckEnd(id, end, msgID); err != nil {
		return false, err
	}
	if t.State != Running {
		return false, nil
	}
	if end.EndedAt.IsZero() {
		end.EndedAt = time.Now().UTC()
	}
	t.State, t.ExitCode, t.Signal, t.Reason, t.EndedAt = end.State, end.ExitCode, end.Signal, end.Reason, end.EndedAt
	t.Notified, t.MessageID = true, msgID
	s.tasks[id] = t
	return true, nil
}
