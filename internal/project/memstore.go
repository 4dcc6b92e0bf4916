package project

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// MemStore is a Store in memory, for tests and tools that need no
// persistence. It passes the same contract suite as the SQLite store.
type MemStore struct {
	// mu guards projects and teams.
	mu       sync.Mutex
	projects []troupe.Project
	teams    map[troupe.ProjectID][]byte
	approved map[troupe.ProjectID]Approval
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{teams: map[troupe.ProjectID][]byte{}, approved: map[troupe.ProjectID]Approval{}}
}

// AddProject implements Store.
func (m *MemStore) AddProject(_ context.Context, p troupe.Project) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range m.projects {
		if q.ID == p.ID {
			return fmt.Errorf("add project: id %s is taken: %w", p.ID, troupe.ErrAlreadyExists)
		}
		if q.Path == p.Path {
			return fmt.Errorf("add project: path %s is registered as %s: %w", p.Path, q.ID, troupe.ErrAlreadyExists)
		}
	}
	m.projects = append(m.projects, p)
	return nil
}

// Projects implements Store.
func (m *MemStore) Projects(context.Context) ([]troupe.Project, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.projects)
	slices.SortStableFunc(out, func(a, b troupe.Project) int {
		if c := a.AddedAt.Compare(b.AddedAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	return out, nil
}

// RemoveProject implements Store.
func (m *MemStore) RemoveProject(_ context.Context, id troupe.ProjectID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.projects, func(p troupe.Project) bool { return p.ID == id })
	if i < 0 {
		return fmt.Errorf("remove project %s: %w", id, troupe.ErrNotFound)
	}
	m.projects = slices.Delete(m.projects, i, i+1)
	delete(m.teams, id)
	delete(m.approved, id)
	return nil
}

// SaveTeam implements Store.
func (m *MemStore) SaveTeam(_ context.Context, id troupe.ProjectID, source []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(m.projects, func(p troupe.Project) bool { return p.ID == id }) {
		return fmt.Errorf("save team of %s: %w", id, troupe.ErrNotFound)
	}
	m.teams[id] = slices.Clone(source)
	return nil
}

// LastTeam implements Store.
func (m *MemStore) LastTeam(_ context.Context, id troupe.ProjectID) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.teams[id]), nil
}

// SaveApproval implements Store.
func (m *MemStore) SaveApproval(_ context.Context, id troupe.ProjectID, a Approval) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(m.projects, func(p troupe.Project) bool { return p.ID == id }) {
		return fmt.Errorf("save approval of %s: %w", id, troupe.ErrNotFound)
	}
	a.Team = slices.Clone(a.Team)
	if a.Team == nil {
		a.Team = []byte{}
	}
	m.approved[id] = a
	return nil
}

// Approval implements Store.
func (m *MemStore) Approval(_ context.Context, id troupe.ProjectID) (Approval, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.approved[id]
	a.Team = slices.Clone(a.Team)
	return a, ok, nil
}
