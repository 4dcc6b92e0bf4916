package check

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// MemStore is the Store in memory: the reference checktest holds the
// SQLite store to.
type MemStore struct {
	mu   sync.Mutex
	last int64
	rs   []Result // oldest first
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{} }

// AddCheckResult implements Store.
func (s *MemStore) AddCheckResult(_ context.Context, r Result) (Result, error) {
	if err := CheckResult(r); err != nil {
		return Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	r.ID = s.last
	s.rs = append(s.rs, r)
	n := 0
	for _, x := range s.rs {
		if x.Key() == r.Key() {
			n++
		}
	}
	for i := 0; n > MaxResultsPerAgent && i < len(s.rs); {
		if s.rs[i].Key() == r.Key() {
			s.rs = slices.Delete(s.rs, i, i+1)
			n--
			continue
		}
		i++
	}
	return r, nil
}

// CheckResults implements Store.
func (s *MemStore) CheckResults(_ context.Context, f Filter) ([]Result, error) {
	if f.Project == "" {
		return nil, fmt.Errorf("list check results: a project is required: %w", troupe.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Result{}
	for i := len(s.rs) - 1; i >= 0 && len(out) < Limit(f.Limit); i-- {
		r := s.rs[i]
		if r.Project == f.Project && (f.Agent == "" || r.Agent == f.Agent) &&
			(f.Turn == "" || r.Turn == f.Turn) && (f.Check == "" || r.Check == f.Check) {
			out = append(out, r)
		}
	}
	return out, nil
}
