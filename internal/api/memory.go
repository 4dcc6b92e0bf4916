package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Memory is what the API needs of the memory notes' store (memory.Store):
// the person reads, searches and edits the notes the agents share.
type Memory interface {
	List(ctx context.Context, dir string) ([]memory.Note, error)
	Read(ctx context.Context, dir, name string) (memory.Note, error)
	Write(ctx context.Context, dir string, n memory.Note) (memory.Note, error)
	Remove(ctx context.Context, dir, name string) (memory.Note, error)
	Search(ctx context.Context, p troupe.Project, query string, limit int) ([]memory.Hit, error)
}

// MemoryNote is a memory note on the wire; Body is absent in lists and
// search hits (read the note for it), Snippet present in hits only.
type MemoryNote struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Type        string    `json:"type"`
	Body        *string   `json:"body,omitempty"`
	Modified    time.Time `json:"modified,omitzero"`
	Snippet     string    `json:"snippet,omitempty"`
}

// MemoryList is the answer of GET .../memory: the notes in name order, or
// with ?q= the search hits, best first. Problems lists the files of
// .troupe/memory that are not valid notes (left out).
type MemoryList struct {
	Notes    []MemoryNote `json:"notes"`
	Problems []string     `json:"problems,omitempty"`
}

// WriteNoteRequest is the body of PUT .../memory/{name}.
type WriteNoteRequest struct {
	Description string `json:"description"`
	Type        string `json:"type,omitempty"`
	Body        string `json:"body"`
}

func (s *Server) routeMemory() {
	s.mux.HandleFunc("GET /api/projects/{id}/memory", s.listMemory)
	s.mux.HandleFunc("GET /api/projects/{id}/memory/{name}", s.readMemory)
	s.mux.HandleFunc("PUT /api/projects/{id}/memory/{name}", s.writeMemory)
	s.mux.HandleFunc("DELETE /api/projects/{id}/memory/{name}", s.removeMemory)
}

func toNote(n memory.Note, body bool) MemoryNote {
	out := MemoryNote{Name: n.Name, Description: n.Description, Type: n.Type, Modified: n.ModTime}
	if body {
		b := n.Body
		out.Body = &b
	}
	return out
}

// memoryProject resolves {id}; it answers errors itself.
func (s *Server) memoryProject(w http.ResponseWriter, r *http.Request) (troupe.Project, bool) {
	id := troupe.ProjectID(r.PathValue("id"))
	info, ok := s.o.Registry.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return troupe.Project{}, false
	}
	if s.o.Memory == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon keeps no memory notes")
		return troupe.Project{}, false
	}
	return info.Project, true
}

func (s *Server) listMemory(w http.ResponseWriter, r *http.Request) {
	p, ok := s.memoryProject(w, r)
	if !ok {
		return
	}
	out := MemoryList{Notes: []MemoryNote{}}
	if q := r.URL.Query().Get("q"); q != "" {
		limit := memory.DefaultSearchLimit
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > memory.MaxSearchLimit {
				writeError(w, http.StatusBadRequest, "invalid", "limit: give a number from 1 to "+strconv.Itoa(memory.MaxSearchLimit))
				return
			}
			limit = n
		}
		hits, err := s.o.Memory.Search(r.Context(), p, q, limit)
		if err != nil {
			s.fail(w, err)
			return
		}
		for _, h := range hits {
			n := toNote(h.Note, false)
			n.Snippet = h.Snippet
			out.Notes = append(out.Notes, n)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	notes, err := s.o.Memory.List(r.Context(), p.Path)
	var bad *memory.NotesError
	if errors.As(err, &bad) {
		for _, e := range bad.Errs {
			out.Problems = append(out.Problems, e.Error())
		}
	} else if err != nil {
		s.fail(w, err)
		return
	}
	for _, n := range notes {
		out.Notes = append(out.Notes, toNote(n, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) readMemory(w http.ResponseWriter, r *http.Request) {
	p, ok := s.memoryProject(w, r)
	if !ok {
		return
	}
	n, err := s.o.Memory.Read(r.Context(), p.Path, r.PathValue("name"))
	if err != nil {
		s.failNote(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toNote(n, true))
}

// writeMemory creates or replaces a note; 200 with the note as saved (its
// name sanitized).
func (s *Server) writeMemory(w http.ResponseWriter, r *http.Request) {
	var in WriteNoteRequest
	if !decode(w, r, &in) {
		return
	}
	p, ok := s.memoryProject(w, r)
	if !ok {
		return
	}
	n, err := s.o.Memory.Write(r.Context(), p.Path, memory.Note{Name: r.PathValue("name"), Description: in.Description, Type: in.Type, Body: in.Body})
	if err != nil {
		s.failNote(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toNote(n, true))
}

// removeMemory deletes a note; 200 with the note as it was.
func (s *Server) removeMemory(w http.ResponseWriter, r *http.Request) {
	p, ok := s.memoryProject(w, r)
	if !ok {
		return
	}
	n, err := s.o.Memory.Remove(r.Context(), p.Path, r.PathValue("name"))
	if err != nil {
		s.failNote(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toNote(n, true))
}

// failNote answers a note's field error (a bad name, description or body)
// as 400 with its sentence, else as fail does.
func (s *Server) failNote(w http.ResponseWriter, err error) {
	var fe *troupe.FieldError
	if errors.As(err, &fe) && !errors.Is(err, troupe.ErrNotFound) && !errors.Is(err, troupe.ErrAlreadyExists) {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	s.fail(w, err)
}
