package api

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Runners is what the API needs of the daemon's runners: the machines
// that run some of its agents (`troupe runner`). The daemon implements it
// when it is started with --runners (or --nats); Options.Runners is nil
// otherwise. Its methods are safe for concurrent use and do not block on
// the network for long: List answers from what the daemon holds.
//
// Add and Revoke change which machines may run agents: they are the
// person's actions, behind the API token or a browser session like every
// /api route; an agent's MCP token opens /mcp only.
type Runners interface {
	// List returns every runner that has credentials, connected or not.
	List() []RunnerInfo
	// Add mints the credentials of a new runner named name: the bytes of
	// its creds file (text), which the daemon does not show again. A name
	// with credentials already: an error matching troupe.ErrAlreadyExists.
	Add(name string) (creds []byte, err error)
	// Revoke ends runner name's credentials, cutting it off if connected;
	// a name without credentials: an error matching troupe.ErrNotFound.
	Revoke(name string) error
}

// RunnerInfo is one runner, as GET /api/runners lists it.
type RunnerInfo struct {
	Name string `json:"name"`
	// Labels are those the runner declared when it last connected
	// (`troupe runner --labels`).
	Labels    []string `json:"labels"`
	Connected bool     `json:"connected"`
	// ConnectedSince is when its current connection began (zero: not
	// connected); LastSeen when the daemon last heard from it (zero:
	// never).
	ConnectedSince time.Time `json:"connected_since,omitzero"`
	LastSeen       time.Time `json:"last_seen,omitzero"`
	// Agents are the agents the daemon assigned to it, of every project.
	Agents []RunnerAgent `json:"agents"`
	Load   RunnerLoad    `json:"load"`
}

// RunnerAgent is an agent assigned to a runner, with its state.
type RunnerAgent struct {
	Project troupe.ProjectID  `json:"project"`
	Agent   troupe.AgentID    `json:"agent"`
	State   troupe.AgentState `json:"state"`
}

// RunnerLoad is how many agents a runner runs of the most it takes
// (`troupe runner --max-agents`; 0: it has not said, never connected).
type RunnerLoad struct {
	Agents    int `json:"agents"`
	MaxAgents int `json:"max_agents"`
}

// AddRunnerRequest is the body of POST /api/runners.
type AddRunnerRequest struct {
	Name string `json:"name"`
}

// RunnerCreds is the answer of POST /api/runners: the new runner's
// credentials, shown this once.
type RunnerCreds struct {
	Name string `json:"name"`
	// Creds is the creds file's text, for `troupe runner --creds FILE`.
	Creds string `json:"creds"`
	// Note says that the credentials are shown once, and how to use them.
	Note string `json:"note"`
}

// runnersOff answers a daemon started without runners.
const runnersOff = "this daemon runs no runners: start it with `troupe serve --runners ADDR` (ADDR: the address runners connect to, like 0.0.0.0:7422) to run agents on other machines"

// routeRunners registers the runner routes.
func (s *Server) routeRunners() {
	s.mux.HandleFunc("GET /api/runners", s.listRunners)
	s.mux.HandleFunc("POST /api/runners", s.addRunner)
	s.mux.HandleFunc("DELETE /api/runners/{name}", s.revokeRunner)
}

// runners answers 503 itself when the daemon runs no runners.
func (s *Server) runners(w http.ResponseWriter) (Runners, bool) {
	if s.o.Runners == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", runnersOff)
		return nil, false
	}
	return s.o.Runners, true
}

// listRunners lists every runner by name, lists never null.
func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.runners(w)
	if !ok {
		return
	}
	out := rs.List()
	if out == nil {
		out = []RunnerInfo{}
	}
	for i := range out {
		if out[i].Labels == nil {
			out[i].Labels = []string{}
		}
		if out[i].Agents == nil {
			out[i].Agents = []RunnerAgent{}
		}
	}
	slices.SortFunc(out, func(a, b RunnerInfo) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// checkRunnerName refuses a name that is not a runner's; it answers the
// error itself.
func checkRunnerName(w http.ResponseWriter, name string) bool {
	if !troupe.RunnerName(name).Valid() {
		writeError(w, http.StatusBadRequest, "invalid", "name: bad runner name "+strconv.Quote(name64(name))+": "+troupe.RunnerNameRule)
		return false
	}
	return true
}

// name64 is a name clipped for an error.
func name64(s string) string { c, _ := clip.Ellipsis(s, 64); return c }

// addRunner mints a runner's credentials and answers them, once.
func (s *Server) addRunner(w http.ResponseWriter, r *http.Request) {
	var req AddRunnerRequest
	if !decode(w, r, &req) {
		return
	}
	rs, ok := s.runners(w)
	if !ok || !checkRunnerName(w, req.Name) {
		return
	}
	creds, err := rs.Add(req.Name)
	if err != nil {
		s.fail(w, err)
		return
	}
	if !utf8.Valid(creds) {
		s.log.Error("runner credentials are not text", "runner", req.Name)
		writeError(w, http.StatusInternalServerError, "internal", "the credentials minted for runner "+req.Name+" are not text: revoke it (troupe runner revoke "+req.Name+") and report this")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, RunnerCreds{Name: req.Name, Creds: string(creds),
		Note: "these credentials are shown once: save them to a file only the runner's user can read, and start the runner with `troupe runner --creds FILE` (they name the daemon and the runner); lost, revoke them and add the runner again"})
}

// revokeRunner ends a runner's credentials.
func (s *Server) revokeRunner(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rs, ok := s.runners(w)
	if !ok || !checkRunnerName(w, name) {
		return
	}
	if err := rs.Revoke(name); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// runnerOf maps each agent placed on a runner to that runner's name, from
// one List; nil when the daemon runs no runners.
func (s *Server) runnerOf() map[troupe.RuntimeKey]string {
	if s.o.Runners == nil {
		return nil
	}
	out := map[troupe.RuntimeKey]string{}
	for _, ri := range s.o.Runners.List() {
		for _, a := range ri.Agents {
			out[troupe.RuntimeKey{Project: a.Project, Agent: a.Agent}] = ri.Name
		}
	}
	return out
}
