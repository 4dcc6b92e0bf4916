package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Attempt is one task given to several worktree agents, ranked by a
// check (internal/attempt).
type Attempt = attempt.Attempt

// AttemptRequest is POST /api/projects/{id}/attempts's body.
type AttemptRequest = attempt.Request

// DiscardAttemptResponse says whose worktrees a discard reset.
type DiscardAttemptResponse struct {
	Attempt Attempt          `json:"attempt"`
	Reset   []troupe.AgentID `json:"reset"`
}

// Attempts starts and lists attempts (attempt.Manager).
type Attempts interface {
	Start(ctx context.Context, p troupe.ProjectID, r attempt.Request) (attempt.Attempt, error)
	Get(ctx context.Context, p troupe.ProjectID, id attempt.ID) (attempt.Attempt, error)
	List(ctx context.Context, p troupe.ProjectID, limit int) ([]attempt.Attempt, error)
	Discard(ctx context.Context, p troupe.ProjectID, id attempt.ID, reset func(ctx context.Context, k troupe.RuntimeKey) error) (attempt.Attempt, []troupe.AgentID, error)
}

// routeAttempts adds the attempts' routes: the person's own actions,
// behind the API token like every /api route.
func (s *Server) routeAttempts() {
	s.mux.HandleFunc("POST /api/projects/{id}/attempts", s.startAttempt)
	s.mux.HandleFunc("GET /api/projects/{id}/attempts", s.listAttempts)
	s.mux.HandleFunc("GET /api/projects/{id}/attempts/{attempt}", s.getAttempt)
	s.mux.HandleFunc("POST /api/projects/{id}/attempts/{attempt}/discard", s.discardAttempt)
}

func (s *Server) attemptsProject(w http.ResponseWriter, r *http.Request) (troupe.ProjectID, bool) {
	id := troupe.ProjectID(r.PathValue("id"))
	if _, ok := s.o.Registry.Get(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return "", false
	}
	if s.o.Attempts == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon runs no attempts")
		return "", false
	}
	return id, true
}

func attemptID(w http.ResponseWriter, r *http.Request) (attempt.ID, bool) {
	n, err := strconv.ParseInt(r.PathValue("attempt"), 10, 64)
	if err != nil || n < 1 {
		writeError(w, http.StatusBadRequest, "invalid", "attempt: give an attempt's number (troupe attempts lists them)")
		return 0, false
	}
	return attempt.ID(n), true
}

func (s *Server) startAttempt(w http.ResponseWriter, r *http.Request) {
	p, ok := s.attemptsProject(w, r)
	if !ok {
		return
	}
	var req AttemptRequest
	if !decode(w, r, &req) {
		return
	}
	a, err := s.o.Attempts.Start(r.Context(), p, req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (s *Server) listAttempts(w http.ResponseWriter, r *http.Request) {
	p, ok := s.attemptsProject(w, r)
	if !ok {
		return
	}
	limit := 0
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "invalid", "limit: give a number from 1 to "+strconv.Itoa(attempt.KeepPerProject))
			return
		}
		limit = n
	}
	as, err := s.o.Attempts.List(r.Context(), p, limit)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, as)
}

func (s *Server) getAttempt(w http.ResponseWriter, r *http.Request) {
	p, ok := s.attemptsProject(w, r)
	if !ok {
		return
	}
	id, ok := attemptID(w, r)
	if !ok {
		return
	}
	a, err := s.o.Attempts.Get(r.Context(), p, id)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// discardAttempt resets the worktrees of a done attempt's losers, each
// through the person's worktree reset (a checkpoint first).
func (s *Server) discardAttempt(w http.ResponseWriter, r *http.Request) {
	p, ok := s.attemptsProject(w, r)
	if !ok {
		return
	}
	id, ok := attemptID(w, r)
	if !ok {
		return
	}
	if s.o.Worktrees == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon has no worktrees")
		return
	}
	reset := func(ctx context.Context, k troupe.RuntimeKey) error {
		spec, dir, ok := s.worktreeOf(k)
		if !ok {
			return fmt.Errorf("%s is not in the team and has no worktree: %w", k.Agent, troupe.ErrNotFound)
		}
		return s.resetWorktree(ctx, k, spec, dir)
	}
	a, done, err := s.o.Attempts.Discard(r.Context(), p, id, reset)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, DiscardAttemptResponse{Attempt: a, Reset: done})
}
