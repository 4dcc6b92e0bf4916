package api

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// DenyRequest is the optional body of POST /api/permissions/{perm}/deny.
type DenyRequest struct {
	// Reason is shown to the agent after "the person denied it: ".
	Reason string `json:"reason,omitempty"`
}

// PermissionInput is one page of a pending request's whole input (GET
// /api/permissions/{perm}/input?offset=N&limit=M): what the person
// approves is what runs, so the input can be read whole, however long.
type PermissionInput struct {
	Input  string `json:"input"`
	Offset int    `json:"offset"`
	Size   int    `json:"size"` // of the whole input; the page is the last one when Offset+len(Input) == Size
}

// MaxInputPage is the most one page of a request's input holds.
const MaxInputPage = 1 << 20

// routePermissions registers the person's side of the permission flow:
// the requests that wait on them (troupe.Permission, across projects) and
// their decisions.
func (s *Server) routePermissions() {
	s.mux.HandleFunc("GET /api/permissions", s.listPermissions)
	s.mux.HandleFunc("GET /api/permissions/{perm}/input", s.permissionInput)
	s.mux.HandleFunc("POST /api/permissions/{perm}/allow", s.decidePermission(true))
	s.mux.HandleFunc("POST /api/permissions/{perm}/deny", s.decidePermission(false))
}

// runtime answers 503 itself when the daemon runs no agents.
func (s *Server) runtime(w http.ResponseWriter) (Runtime, bool) {
	if s.o.Runtime == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon runs no agents")
		return nil, false
	}
	return s.o.Runtime, true
}

// listPermissions lists the pending requests, oldest first; ?project=ID
// keeps one project's.
func (s *Server) listPermissions(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.runtime(w)
	if !ok {
		return
	}
	p := troupe.ProjectID(r.URL.Query().Get("project"))
	if _, ok := s.o.Registry.Get(p); p != "" && !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(p)+" is not registered: see `troupe project list`")
		return
	}
	writeJSON(w, http.StatusOK, rt.Permissions(p))
}

// permissionInput answers one page of a pending request's input.
func (s *Server) permissionInput(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.runtime(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	off, err1 := strconv.Atoi(cmp.Or(q.Get("offset"), "0"))
	limit, err2 := strconv.Atoi(cmp.Or(q.Get("limit"), strconv.Itoa(MaxInputPage)))
	if err1 != nil || err2 != nil || off < 0 || limit < 1 {
		writeError(w, http.StatusBadRequest, "invalid", "offset and limit are whole numbers (offset from 0, limit from 1), like ?offset=0&limit=65536")
		return
	}
	in, size, err := rt.PermissionInput(troupe.PermissionID(r.PathValue("perm")), off, min(limit, MaxInputPage))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, PermissionInput{Input: in, Offset: min(off, size), Size: size})
}

// decidePermission allows or denies a pending request and answers it,
// decided. Unknown: 404; already decided (or dropped when its session
// ended): 409.
func (s *Server) decidePermission(allow bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in DenyRequest
		if !allow && !decodeOptional(w, r, &in) {
			return
		}
		rt, ok := s.runtime(w)
		if !ok {
			return
		}
		p, err := rt.Decide(r.Context(), troupe.PermissionID(r.PathValue("perm")), allow, in.Reason)
		if err != nil {
			s.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	}
}
