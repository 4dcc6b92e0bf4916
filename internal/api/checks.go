package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// CheckResult is one run of a project's check on an agent's workspace
// (internal/check): POST .../checks/{name}/run answers one, GET
// /api/projects/{id}/checks lists them.
type CheckResult = check.Result

// Checks runs a project's checks and lists their results (check.Checker).
type Checks interface {
	Run(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName) (check.Result, error)
	Results(ctx context.Context, f check.Filter) ([]check.Result, error)
}

// routeChecks adds the checks' routes. Running one is the person's own
// action, behind the API token like every /api route (an agent's MCP
// token opens /mcp only); the check is the approved team's (C17).
func (s *Server) routeChecks() {
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/checks/{name}/run", s.runCheck)
	s.mux.HandleFunc("GET /api/projects/{id}/checks", s.listChecks)
}

func (s *Server) checksProject(w http.ResponseWriter, r *http.Request) (troupe.ProjectID, bool) {
	id := troupe.ProjectID(r.PathValue("id"))
	if _, ok := s.o.Registry.Get(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return "", false
	}
	if s.o.Checks == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon runs no checks")
		return "", false
	}
	return id, true
}

func (s *Server) runCheck(w http.ResponseWriter, r *http.Request) {
	p, ok := s.checksProject(w, r)
	if !ok {
		return
	}
	k := troupe.RuntimeKey{Project: p, Agent: troupe.AgentID(r.PathValue("agent"))}
	res, err := s.o.Checks.Run(r.Context(), k, troupe.CheckName(r.PathValue("name")))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) listChecks(w http.ResponseWriter, r *http.Request) {
	p, ok := s.checksProject(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := check.Filter{Project: p, Agent: troupe.AgentID(q.Get("agent")), Turn: troupe.TurnID(q.Get("turn")), Check: troupe.CheckName(q.Get("check"))}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "invalid", "limit: give a number from 1 to "+strconv.Itoa(check.MaxResultsPerAgent))
			return
		}
		f.Limit = n
	}
	rs, err := s.o.Checks.Results(r.Context(), f)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rs)
}
