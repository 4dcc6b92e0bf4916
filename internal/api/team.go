package api

import (
	"net/http"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Grant is one grant of an agent: for a held change, a field the team
// file widens, Old → New; for an approved agent, what it holds (New).
type Grant struct {
	Field string `json:"field"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new"`
}

// AgentGrants is an agent with its grants. New marks, in a held change, an
// agent the approved team does not have.
type AgentGrants struct {
	Agent  troupe.AgentID `json:"agent"`
	Engine troupe.Engine  `json:"engine,omitempty"`
	New    bool           `json:"new,omitempty"`
	Grants []Grant        `json:"grants"`
	// Options is an approved agent's engine option table ([agent.<engine>]:
	// endpoints and key variable names, never keys), in GET .../team only.
	Options map[string]any `json:"options,omitempty"`
}

// PendingTeam is a team change that waits for the person: GET
// /api/projects/{id}/team/pending, and the entries of GET
// /api/team-changes. Approve or reject it with its Digest.
type PendingTeam struct {
	Project  troupe.ProjectID `json:"project"`
	Digest   string           `json:"digest"`
	Agents   []AgentGrants    `json:"agents"`
	Checks   []CheckGrants    `json:"checks,omitempty"`
	Rejected bool             `json:"rejected,omitempty"`
}

// CheckGrants is a held check ([checks]): New when the approved team has
// none of that name; Grants its command, dir and timeout that widen.
type CheckGrants struct {
	Check  troupe.CheckName `json:"check"`
	New    bool             `json:"new,omitempty"`
	Grants []Grant          `json:"grants"`
}

// Team is GET /api/projects/{id}/team: the approved team in force and
// the change waiting, if any.
type Team struct {
	Project  troupe.ProjectID `json:"project"`
	Approved []AgentGrants    `json:"approved"`
	// Checks are the approved team's checks ([checks]), those in force.
	Checks  []troupe.Check `json:"checks,omitempty"`
	Pending *PendingTeam   `json:"pending,omitempty"`
}

// TeamDecision is the body of POST /api/projects/{id}/team/approve and
// .../reject: the digest of the change the person saw.
type TeamDecision struct {
	Digest string `json:"digest"`
}

// routeTeam adds the person's team routes (C17). They sit behind the API
// token like every /api route; an agent's MCP token opens /mcp only.
func (s *Server) routeTeam() {
	s.mux.HandleFunc("GET /api/team-changes", s.teamChanges)
	s.mux.HandleFunc("GET /api/projects/{id}/team", s.team)
	s.mux.HandleFunc("GET /api/projects/{id}/team/pending", s.teamPending)
	s.mux.HandleFunc("POST /api/projects/{id}/team/approve", s.decideTeam(true))
	s.mux.HandleFunc("POST /api/projects/{id}/team/reject", s.decideTeam(false))
	s.mux.HandleFunc("GET /api/projects/{id}/team/file", s.teamFile)
	s.mux.HandleFunc("PUT /api/projects/{id}/team/file", s.writeTeamFile)
}

// teamFile answers the team file's text, for the person to edit it.
func (s *Server) teamFile(w http.ResponseWriter, r *http.Request) {
	id := troupe.ProjectID(r.PathValue("id"))
	src, d, err := s.o.Registry.TeamFile(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	info, _ := s.o.Registry.Get(id)
	writeJSON(w, http.StatusOK, TeamFile{Text: string(src), Digest: d, Path: filepath.Join(info.Path, project.TeamFile)})
}

// writeTeamFile writes the person's edit of the team file: 200 with the
// project as it stands after the load (TeamHeld when the edit widens a
// grant), 409 when the file changed since it was read, 400 when the text
// does not load.
func (s *Server) writeTeamFile(w http.ResponseWriter, r *http.Request) {
	var in TeamFile
	if !decode(w, r, &in) {
		return
	}
	info, err := s.o.Registry.WriteTeamFile(r.Context(), troupe.ProjectID(r.PathValue("id")), []byte(in.Text), in.Digest)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.withHeld(info))
}

func teamGrants(t *project.Team) []AgentGrants {
	out := []AgentGrants{}
	if t == nil {
		return out
	}
	for _, a := range t.Agents {
		out = append(out, AgentGrants{Agent: a.Name, Engine: a.Engine, Grants: toGrants(project.Grants(a))})
	}
	return out
}

func toGrants(gs []project.GrantChange) []Grant {
	out := make([]Grant, len(gs))
	for i, g := range gs {
		out[i] = Grant{Field: g.Field, Old: g.Old, New: g.New}
	}
	return out
}

func toPending(p project.Pending) *PendingTeam {
	out := &PendingTeam{Project: p.Project, Digest: p.Digest, Rejected: p.Rejected, Agents: []AgentGrants{}}
	for _, h := range p.Agents {
		out.Agents = append(out.Agents, AgentGrants{Agent: h.Agent, New: h.New, Grants: toGrants(h.Changes)})
	}
	for _, h := range p.Checks {
		out.Checks = append(out.Checks, CheckGrants{Check: h.Check, New: h.New, Grants: toGrants(h.Changes)})
	}
	return out
}

// teamChanges lists the held changes of every project the person has not
// rejected: what "Needs you" shows.
func (s *Server) teamChanges(w http.ResponseWriter, r *http.Request) {
	out := []*PendingTeam{}
	for _, p := range s.o.Registry.List() {
		if pend, ok := s.o.Registry.Pending(p.ID); ok && !pend.Rejected {
			out = append(out, toPending(pend))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) team(w http.ResponseWriter, r *http.Request) {
	id := troupe.ProjectID(r.PathValue("id"))
	info, ok := s.o.Registry.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered")
		return
	}
	out := Team{Project: id, Approved: teamGrants(info.Team)}
	if info.Team != nil {
		for i, a := range info.Team.Agents {
			out.Approved[i].Options = a.Options
		}
		out.Checks = info.Team.Checks
	}
	if pend, ok := s.o.Registry.Pending(id); ok {
		out.Pending = toPending(pend)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) teamPending(w http.ResponseWriter, r *http.Request) {
	id := troupe.ProjectID(r.PathValue("id"))
	if _, ok := s.o.Registry.Get(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered")
		return
	}
	pend, ok := s.o.Registry.Pending(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no team change of project "+string(id)+" waits for approval")
		return
	}
	writeJSON(w, http.StatusOK, toPending(pend))
}

func (s *Server) decideTeam(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := troupe.ProjectID(r.PathValue("id"))
		var req TeamDecision
		if !decode(w, r, &req) {
			return
		}
		if req.Digest == "" {
			writeError(w, http.StatusBadRequest, "invalid", "digest: missing: give the digest of the change you reviewed (GET /api/projects/{id}/team/pending)")
			return
		}
		var err error
		if approve {
			err = s.o.Registry.Approve(r.Context(), id, req.Digest)
		} else {
			err = s.o.Registry.Reject(r.Context(), id, req.Digest)
		}
		if err != nil {
			s.fail(w, err)
			return
		}
		s.o.Hub.Publish(troupe.RuntimeKey{Project: id}, events.TeamDecided{Digest: req.Digest, Approved: approve})
		w.WriteHeader(http.StatusNoContent)
	}
}
