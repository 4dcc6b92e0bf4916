package api

import (
	"context"
	"net/http"
	"time"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Journal is what the API needs of the journal store: an agent's turns as
// it kept them (see internal/journal for the caps and bounds).
type Journal interface {
	Turns(ctx context.Context, k troupe.RuntimeKey, before int64, limit int) ([]journal.Turn, error)
	Turn(ctx context.Context, k troupe.RuntimeKey, turn troupe.TurnID) (journal.Turn, error)
}

// AgentLog is the answer of GET .../agents/{agent}/log: the agent's turns,
// newest first, each with its messages, events and end (journal.Turn).
// Before is the cursor for older turns (?before=), 0 when there are none.
type AgentLog struct {
	Agent  troupe.AgentID `json:"agent"`
	Turns  []journal.Turn `json:"turns"`
	Before int64          `json:"before,omitempty"`
}

// agentLog serves GET /api/projects/{id}/agents/{agent}/log?turn=ID&limit=N&before=SEQ.
func (s *Server) agentLog(w http.ResponseWriter, r *http.Request) {
	k := troupe.RuntimeKey{Project: troupe.ProjectID(r.PathValue("id")), Agent: troupe.AgentID(r.PathValue("agent"))}
	if _, ok := s.o.Registry.Get(k.Project); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(k.Project)+" is not registered: see `troupe project list`")
		return
	}
	if s.o.Journal == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon keeps no agent logs")
		return
	}
	if !s.knownAgent(w, k) {
		return
	}
	// A turn that has ended is in the log: the journal's writer records
	// off the turn's path, so wait for it a moment (bounded; a slow disk
	// shows the log as it is).
	if s.o.Runtime != nil {
		sctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		err := s.o.Runtime.SyncJournal(sctx)
		cancel()
		if err != nil && r.Context().Err() == nil {
			s.log.Warn("agent log read before the journal caught up", "err", err)
		}
	}
	q := r.URL.Query()
	out := AgentLog{Agent: k.Agent, Turns: []journal.Turn{}}
	if id := q.Get("turn"); id != "" {
		t, err := s.o.Journal.Turn(r.Context(), k, troupe.TurnID(id))
		if err != nil {
			s.fail(w, err)
			return
		}
		out.Turns = append(out.Turns, t)
		writeJSON(w, http.StatusOK, out)
		return
	}
	limit, err1 := parseInt(q.Get("limit"))
	before, err2 := parseInt(q.Get("before"))
	if err1 != nil || err2 != nil || limit < 0 || limit > journal.MaxTurns || before < 0 {
		writeError(w, http.StatusBadRequest, "invalid", "limit and before: give whole numbers, limit at most 200")
		return
	}
	ts, err := s.o.Journal.Turns(r.Context(), k, before, int(limit))
	if err != nil {
		s.fail(w, err)
		return
	}
	out.Turns = append(out.Turns, ts...)
	if n := len(ts); n > 0 && n == journal.Limit(int(limit)) {
		out.Before = ts[n-1].Seq
	}
	writeJSON(w, http.StatusOK, out)
}

// knownAgent answers 404 for an agent not in the project's team, naming
// the agents that are; it lets a removed agent's log be read while its
// project has no team loaded.
func (s *Server) knownAgent(w http.ResponseWriter, k troupe.RuntimeKey) bool {
	info, _ := s.o.Registry.Get(k.Project)
	if info.Team == nil {
		return true
	}
	var names []troupe.AgentID
	for _, a := range info.Team.Agents {
		if a.Name == k.Agent {
			return true
		}
		names = append(names, a.Name)
	}
	writeError(w, http.StatusNotFound, "not_found", troupe.NoAgent(k.Agent, names).Error())
	return false
}
