package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Sessions keeps each agent's engine conversation id (the id its engine
// reported with engine.EventSession) and the engine that reported it, so
// the agent's next session continues the conversation (StartSpec.Resume),
// also after a daemon restart or a crash. internal/store/sqlite implements
// it durably; MemSessions in memory. Methods are safe for concurrent use.
type Sessions interface {
	// SessionID returns k's conversation id and its engine; an empty id
	// (and a nil error) when there is none.
	SessionID(ctx context.Context, k troupe.RuntimeKey) (eng troupe.Engine, id string, err error)
	// SetSessionID records k's conversation, replacing any earlier one. An
	// empty id is troupe.ErrInvalid.
	SetSessionID(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) error
	// ClearSessionID forgets k's conversation; none is not an error.
	ClearSessionID(ctx context.Context, k troupe.RuntimeKey) error
	// ClearProjectSessions forgets the conversations of every agent of p.
	ClearProjectSessions(ctx context.Context, p troupe.ProjectID) error
}

// MemSessions is Sessions in memory: a daemon restart forgets it. The
// runtime uses it when Options.Sessions is nil; tests use it.
type MemSessions struct {
	mu sync.Mutex // guards m
	m  map[troupe.RuntimeKey]storedSession
}

type storedSession struct {
	eng troupe.Engine
	id  string
}

var _ Sessions = (*MemSessions)(nil)

// NewMemSessions returns an empty MemSessions.
func NewMemSessions() *MemSessions {
	return &MemSessions{m: map[troupe.RuntimeKey]storedSession{}}
}

// SessionID implements Sessions.
func (s *MemSessions) SessionID(_ context.Context, k troupe.RuntimeKey) (troupe.Engine, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[k]
	return v.eng, v.id, nil
}

// SetSessionID implements Sessions.
func (s *MemSessions) SetSessionID(_ context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) error {
	if id == "" {
		return fmt.Errorf("set session id of %s: empty id: %w", k.Agent, troupe.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = storedSession{eng: eng, id: id}
	return nil
}

// ClearSessionID implements Sessions.
func (s *MemSessions) ClearSessionID(_ context.Context, k troupe.RuntimeKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

// ClearProjectSessions implements Sessions.
func (s *MemSessions) ClearProjectSessions(_ context.Context, p troupe.ProjectID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if k.Project == p {
			delete(s.m, k)
		}
	}
	return nil
}

// ResumeID is the conversation k's next session continues: the stored id
// when its engine is the agent's engine now (a team edit that changes the
// engine starts a new conversation); "" for a new one.
func (r *Runtime) ResumeID(ctx context.Context, k troupe.RuntimeKey) (string, error) {
	spec, _, ok := r.o.Teams.Agent(k)
	if !ok {
		return "", nil
	}
	eng, id, err := r.o.Sessions.SessionID(ctx, k)
	if err != nil {
		return "", fmt.Errorf("read session id of %s: %w", k.Agent, err)
	}
	if eng != spec.Engine {
		return "", nil
	}
	return id, nil
}

// AdoptSession makes id the conversation k's next session resumes (a
// session of eng handed to the agent by the person). It is refused with
// troupe.ErrConflict while k has a session running: that session would
// go on writing its own conversation and store its id over this one.
func (r *Runtime) AdoptSession(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) error {
	if err := r.checkTarget(k, troupe.Person); err != nil {
		return err
	}
	set := func(ctx context.Context) error {
		return r.o.Sessions.SetSessionID(ctx, k, eng, id)
	}
	if a := r.actor(k); a != nil {
		err := a.do(ctx, func(ctx context.Context) error {
			if a.session() != nil {
				return fmt.Errorf("agent %s has a session running (conversation %s): stop it first with `troupe reset %s` (its conversation stays on disk), then hand this one over: %w",
					k.Agent, a.currentID(ctx), k.Agent, troupe.ErrConflict)
			}
			return set(ctx)
		})
		if !errors.Is(err, errActorGone) {
			return err
		}
	}
	return set(ctx)
}

// currentID is the conversation id stored for the actor's key ("?" when
// it cannot be read).
func (a *actor) currentID(ctx context.Context) string {
	_, id, err := a.rt.o.Sessions.SessionID(ctx, a.key)
	if err != nil || id == "" {
		return "?"
	}
	return id
}
