package api

import "net/http"

// routeAgentControl registers the person's controls of one agent: reset
// (a new conversation), restart (a new session, the same conversation) and
// interrupt (stop the turn in flight).
func (s *Server) routeAgentControl() {
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/reset", s.resetAgent)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/restart", s.restartAgent)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/interrupt", s.interruptAgent)
}

// resetAgent forgets the agent's conversation and closes its session now;
// a turn in flight ends failed ("reset by the person"). A checkpoint of
// its workspace comes first (one that fails is logged: a reset drops the
// conversation, not the files). 204 when done.
func (s *Server) resetAgent(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	if info, known := s.o.Registry.Get(k.Project); known {
		if err := s.saveCheckpoint(r.Context(), k, info.Path, "reset"); err != nil {
			s.log.Warn("reset without a checkpoint", "project", k.Project, "agent", k.Agent, "err", err)
		}
	}
	if err := s.o.Runtime.Reset(r.Context(), k); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// interruptAgent asks the engine to stop the agent's turn in flight; the
// turn then ends with the error "interrupted". 202: the turn ends after.
// No turn in flight: 409.
func (s *Server) interruptAgent(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	if err := s.o.Runtime.Interrupt(r.Context(), k); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// restartAgent closes the agent's session, keeping its conversation, which
// the next session resumes; a turn in flight ends failed ("restarted by the
// person"). 204 when done.
func (s *Server) restartAgent(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	if err := s.o.Runtime.Restart(r.Context(), k); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
