package attempt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Store keeps attempts. Implementations are safe for concurrent use.
type Store interface {
	// AddAttempt records a (its ID ignored) and returns it with its ID,
	// greater than every ID given before. It keeps the newest
	// KeepPerProject attempts of a's project.
	AddAttempt(ctx context.Context, a Attempt) (Attempt, error)
	// SaveAttempt replaces the attempt a.ID of a.Project
	// (troupe.ErrNotFound when it is gone).
	SaveAttempt(ctx context.Context, a Attempt) error
	// Attempt returns attempt id of project p, or troupe.ErrNotFound.
	Attempt(ctx context.Context, p troupe.ProjectID, id ID) (Attempt, error)
	// Attempts lists project p's attempts, newest first, at most limit
	// (0 or more than KeepPerProject: KeepPerProject).
	Attempts(ctx context.Context, p troupe.ProjectID, limit int) ([]Attempt, error)
	// RunningAttempts lists the running attempts of every project, oldest
	// first: the ones Run resumes.
	RunningAttempts(ctx context.Context) ([]Attempt, error)
}

// Valid refuses an attempt a Store must not keep, with troupe.ErrInvalid.
func Valid(a Attempt) error {
	if a.Project == "" || a.Task == "" || a.Base == "" || (a.State != Running && a.State != Done) {
		return fmt.Errorf("keep attempt: project, task, base and state are required: %w", troupe.ErrInvalid)
	}
	if len(a.Members) == 0 || len(a.Members) > MaxAgents {
		return fmt.Errorf("keep attempt: %d members, want 1 to %d: %w", len(a.Members), MaxAgents, troupe.ErrInvalid)
	}
	return nil
}

// MemStore is a Store in memory, for tests.
type MemStore struct {
	mu   sync.Mutex
	last ID
	all  []Attempt // by ID
}

var _ Store = (*MemStore)(nil)

// clone copies a through JSON, as a real store would.
func clone(a Attempt) Attempt {
	b, _ := json.Marshal(a)
	var c Attempt
	json.Unmarshal(b, &c)
	return c
}

// AddAttempt implements Store.
func (s *MemStore) AddAttempt(_ context.Context, a Attempt) (Attempt, error) {
	if err := Valid(a); err != nil {
		return Attempt{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	a.ID = s.last
	s.all = append(s.all, clone(a))
	n := 0
	for i := len(s.all) - 1; i >= 0; i-- {
		if s.all[i].Project != a.Project {
			continue
		}
		if n++; n > KeepPerProject {
			s.all = slices.Delete(s.all, i, i+1)
		}
	}
	return a, nil
}

// SaveAttempt implements Store.
func (s *MemStore) SaveAttempt(_ context.Context, a Attempt) error {
	if err := Valid(a); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.all {
		if s.all[i].ID == a.ID && s.all[i].Project == a.Project {
			s.all[i] = clone(a)
			return nil
		}
	}
	return fmt.Errorf("save attempt %d: %w", a.ID, troupe.ErrNotFound)
}

// Attempt implements Store.
func (s *MemStore) Attempt(_ context.Context, p troupe.ProjectID, id ID) (Attempt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.all {
		if a.ID == id && a.Project == p {
			return clone(a), nil
		}
	}
	return Attempt{}, fmt.Errorf("attempt %d: %w", id, troupe.ErrNotFound)
}

// Attempts implements Store.
func (s *MemStore) Attempts(_ context.Context, p troupe.ProjectID, limit int) ([]Attempt, error) {
	if limit <= 0 || limit > KeepPerProject {
		limit = KeepPerProject
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Attempt{}
	for i := len(s.all) - 1; i >= 0 && len(out) < limit; i-- {
		if s.all[i].Project == p {
			out = append(out, clone(s.all[i]))
		}
	}
	return out, nil
}

// RunningAttempts implements Store.
func (s *MemStore) RunningAttempts(context.Context) ([]Attempt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Attempt
	for _, a := range s.all {
		if a.State == Running {
			out = append(out, clone(a))
		}
	}
	return out, nil
}
