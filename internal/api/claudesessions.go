package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// ClaudeSessions is what the API needs of internal/claudesessions (its
// Machine): the Claude Code sessions of this machine (C8, C9).
type ClaudeSessions interface {
	List(ctx context.Context, q claudesessions.Query) (claudesessions.Listing, error)
	Get(ctx context.Context, id string) (claudesessions.Session, error)
	ClaimResume(ctx context.Context, id string, h claudesessions.Holder) (claudesessions.Claim, error)
	Release(id, token string) bool
	CheckHandOff(ctx context.Context, id string) (claudesessions.Session, error)
	Live(id string) (claudesessions.Liveness, bool)
	Follow(ctx context.Context, id string, offset int64, wait time.Duration) (claudesessions.Chunk, error)
}

// SessionAdopter is the runtime's hand-off of a conversation to an agent
// (runtime.Runtime.AdoptSession).
type SessionAdopter interface {
	AdoptSession(ctx context.Context, k troupe.RuntimeKey, eng troupe.Engine, id string) error
}

// ClaudeSession is one Claude Code session of the machine.
type ClaudeSession struct {
	ID string `json:"id"`
	// Cwd is the folder the session started in, read inside its
	// transcript; CwdExists tells whether it is still a folder.
	Cwd       string    `json:"cwd"`
	CwdExists bool      `json:"cwd_exists"`
	Title     string    `json:"title"`
	TitleKind string    `json:"title_kind"` // custom, ai, summary, prompt
	Prompt    string    `json:"first_prompt"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
	Messages  int       `json:"messages"`
	// MessagesPartial: the transcript was read at its head and tail only
	// so far (the index reads the rest in the background); Messages is a
	// lower bound.
	MessagesPartial bool   `json:"messages_partial,omitempty"`
	Model           string `json:"model,omitempty"`
	Version         string `json:"version,omitempty"`
	Size            int64  `json:"size"`
	Path            string `json:"path"`
	// Skipped counts transcript lines not understood (truncated, garbled,
	// foreign, over the line cap).
	Skipped int `json:"skipped_lines"`
	// Project is the registered project whose folder holds Cwd.
	Project *troupe.ProjectID `json:"project,omitempty"`
	// Agent is troupe's agent that ran the session, if one did.
	Agent *AgentRef `json:"agent,omitempty"`
	Live  bool      `json:"live"`
	// Status is idle, busy or waiting when live (empty when the CLI does
	// not say); WaitingFor what it waits on.
	Status     string `json:"status,omitempty"`
	WaitingFor string `json:"waiting_for,omitempty"`
	PIDs       []int  `json:"pids,omitempty"`
	// Doubt says why a session reads live without proof (C8).
	Doubt string `json:"doubt,omitempty"`
	// HeldBy names who holds the id inside troupe (a resume in a
	// terminal, an agent).
	HeldBy string `json:"held_by,omitempty"`
}

// AgentRef names an agent of a project.
type AgentRef struct {
	Project troupe.ProjectID `json:"project"`
	Agent   troupe.AgentID   `json:"agent"`
}

func agentRef(k *troupe.RuntimeKey) *AgentRef {
	if k == nil {
		return nil
	}
	return &AgentRef{Project: k.Project, Agent: k.Agent}
}

// ClaudeSessionList is the answer of GET /api/claude-sessions.
type ClaudeSessionList struct {
	Sessions []ClaudeSession `json:"sessions"`
	Total    int             `json:"total"` // before limit
	// Unreadable lists registry files that could not be read while their
	// process may run: no session can be proved dead while one is there.
	Unreadable []string `json:"registry_unreadable,omitempty"`
	// Index says what bringing the index up to date took.
	Index ClaudeIndexReport `json:"index"`
}

// ClaudeIndexReport is claudesessions.SyncReport on the wire.
type ClaudeIndexReport struct {
	Full   bool    `json:"full"`
	Stated int     `json:"stated"`
	Read   int     `json:"read"`
	Bytes  int64   `json:"bytes"`
	TookMS float64 `json:"took_ms"`
}

// ClaimRequest is the body of POST /api/claude-sessions/{id}/claim: the
// process that will run the resume (the claim lasts while it runs).
type ClaimRequest struct {
	PID int `json:"pid"`
}

// ClaimResponse is a held session: run it, then DELETE the claim.
type ClaimResponse struct {
	Session ClaudeSession `json:"session"`
	Claim   string        `json:"claim"`
}

// HandOffRequest is the body of POST /api/claude-sessions/{id}/hand-off.
type HandOffRequest struct {
	Project troupe.ProjectID `json:"project"`
	Agent   troupe.AgentID   `json:"agent"`
}

// ClaudeTranscript is a piece of a transcript from an offset.
type ClaudeTranscript struct {
	Entries []claudesessions.Entry `json:"entries"`
	Next    int64                  `json:"next"`
	Size    int64                  `json:"size"`
	Skipped int                    `json:"skipped_lines"`
	Live    bool                   `json:"live"`
}

// MaxFollowWait bounds ?wait= of the transcript route.
const MaxFollowWait = 30 * time.Second

func (s *Server) routeClaudeSessions() {
	s.mux.HandleFunc("GET /api/claude-sessions", s.claudeList)
	s.mux.HandleFunc("GET /api/claude-sessions/{sid}", s.claudeGet)
	s.mux.HandleFunc("POST /api/claude-sessions/{sid}/claim", s.claudeClaim)
	s.mux.HandleFunc("DELETE /api/claude-sessions/{sid}/claim/{token}", s.claudeRelease)
	s.mux.HandleFunc("POST /api/claude-sessions/{sid}/hand-off", s.claudeHandOff)
	s.mux.HandleFunc("GET /api/claude-sessions/{sid}/transcript", s.claudeTranscript)
}

func (s *Server) claude(w http.ResponseWriter) bool {
	if s.o.Claude == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon does not index Claude Code sessions")
		return false
	}
	return true
}

func wireClaude(c claudesessions.Session) ClaudeSession {
	out := ClaudeSession{ID: c.ID, Cwd: c.Cwd, CwdExists: claudesessions.FolderExists(c.Cwd), Title: c.Title, TitleKind: c.TitleKind,
		Prompt: c.Prompt, First: c.First, Last: c.Last, Messages: c.Messages, MessagesPartial: !c.Complete, Model: c.Model, Version: c.Version,
		Size: c.Stamp.Size, Path: c.Path, Skipped: c.Skipped, Agent: agentRef(c.Agent), Live: c.Live, HeldBy: c.HeldBy}
	if c.Project != nil {
		id := c.Project.ID
		out.Project = &id
	}
	if c.Live {
		out.Status, out.WaitingFor, out.PIDs, out.Doubt = c.Liveness.Status, c.Liveness.WaitingFor, c.Liveness.PIDs, c.Liveness.Doubt
	}
	return out
}

func (s *Server) claudeList(w http.ResponseWriter, r *http.Request) {
	if !s.claude(w) {
		return
	}
	q := r.URL.Query()
	live, _ := strconv.ParseBool(q.Get("live"))
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid", "limit "+strconv.Quote(v)+": give a count, 0 for all")
			return
		}
		limit = n
	}
	l, err := s.o.Claude.List(r.Context(), claudesessions.Query{Live: live, Project: q.Get("project"), Search: q.Get("search"), Limit: limit})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ClaudeListing(l))
}

// ClaudeListing is a listing of the machine's Claude sessions on the wire:
// the daemon's answer, and the CLI's own when no daemon runs.
func ClaudeListing(l claudesessions.Listing) ClaudeSessionList {
	out := ClaudeSessionList{Sessions: make([]ClaudeSession, 0, len(l.Sessions)), Total: l.Total, Unreadable: l.Unknown,
		Index: ClaudeIndexReport{Full: l.Sync.Full, Stated: l.Sync.Stated, Read: l.Sync.Read, Bytes: l.Sync.Bytes,
			TookMS: float64(l.Sync.Took.Microseconds()) / 1000}}
	for _, c := range l.Sessions {
		out.Sessions = append(out.Sessions, wireClaude(c))
	}
	return out
}

func (s *Server) claudeGet(w http.ResponseWriter, r *http.Request) {
	if !s.claude(w) {
		return
	}
	c, err := s.o.Claude.Get(r.Context(), r.PathValue("sid"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireClaude(c))
}

// claudeClaim holds a dead session for a resume run by the process
// req.PID (C9): 409 with the reason and the alternatives when it is live
// or held.
func (s *Server) claudeClaim(w http.ResponseWriter, r *http.Request) {
	if !s.claude(w) {
		return
	}
	var req ClaimRequest
	if !decode(w, r, &req) {
		return
	}
	if req.PID <= 0 {
		writeError(w, http.StatusBadRequest, "invalid", "pid: give the id of the process that runs the resume")
		return
	}
	c, err := s.o.Claude.ClaimResume(r.Context(), r.PathValue("sid"),
		claudesessions.Holder{Name: fmt.Sprintf("a `troupe resume` (pid %d)", req.PID), PID: req.PID})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ClaimResponse{Session: wireClaude(c.Session), Claim: c.Token})
}

func (s *Server) claudeRelease(w http.ResponseWriter, r *http.Request) {
	if !s.claude(w) {
		return
	}
	if !s.o.Claude.Release(r.PathValue("sid"), r.PathValue("token")) {
		writeError(w, http.StatusNotFound, "not_found", "no such claim on session "+r.PathValue("sid"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// claudeHandOff makes a dead session the conversation a team agent's next
// session resumes: refused when the session is live or held, when the
// agent is not a Claude agent, or when the agent's own session runs or
// its current conversation is live.
func (s *Server) claudeHandOff(w http.ResponseWriter, r *http.Request) {
	if !s.claude(w) {
		return
	}
	var req HandOffRequest
	if !decode(w, r, &req) {
		return
	}
	ad, ok := s.o.Runtime.(SessionAdopter)
	if s.o.Runtime == nil || !ok {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon runs no agents")
		return
	}
	k := troupe.RuntimeKey{Project: req.Project, Agent: req.Agent}
	if _, ok := s.o.Registry.Get(k.Project); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(k.Project)+" is not registered: see `troupe project list`")
		return
	}
	spec, _, ok := s.o.Registry.Agent(k)
	if !ok {
		s.noAgent(w, k)
		return
	}
	if spec.Engine != troupe.EngineClaude {
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("agent %s runs engine %s: only a Claude agent can resume a Claude Code session", k.Agent, spec.Engine))
		return
	}
	id := r.PathValue("sid")
	c, err := s.o.Claude.CheckHandOff(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	// Claude Code finds a conversation by the folder it runs in: one
	// started elsewhere is "No conversation found" there, and the agent
	// would silently begin a new one.
	p, _ := s.o.Registry.Get(k.Project)
	work := p.Path
	if spec.Workspace == worktree.Worktree && s.o.Worktrees != nil {
		work = s.o.Worktrees.Path(k)
	}
	if c.Cwd == "" || !sameDir(c.Cwd, work) {
		started := c.Cwd
		if started == "" {
			started = "a folder its transcript does not name"
		}
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("session %s was started in %s, and agent %s works in %s: Claude Code resumes a conversation only in the folder it started in; resume it there yourself (troupe resume %s), or hand it to an agent working in that folder", id, started, k.Agent, work, id))
		return
	}
	if cur, err := s.o.Runtime.ResumeID(r.Context(), k); err == nil && cur != "" && cur != id {
		if lv, live := s.o.Claude.Live(cur); live {
			pid := 0
			if len(lv.PIDs) > 0 {
				pid = lv.PIDs[0]
			}
			s.fail(w, fmt.Errorf("agent %s's own session %s is live (pid %d): stop it first (`troupe reset %s`): %w", k.Agent, cur, pid, k.Agent, troupe.ErrConflict))
			return
		}
	}
	if err := ad.AdoptSession(r.Context(), k, troupe.EngineClaude, id); err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireClaude(c))
}

// sameDir reports whether a and b name the same folder, links resolved.
func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

func (s *Server) claudeTranscript(w http.ResponseWriter, r *http.Request) {
	if !s.claude(w) {
		return
	}
	q := r.URL.Query()
	var offset int64
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid", "offset "+strconv.Quote(v)+": give a byte offset (0 or more)")
			return
		}
		offset = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "invalid", "wait "+strconv.Quote(v)+": give a duration like 20s")
			return
		}
		wait = min(d, MaxFollowWait)
	}
	c, err := s.o.Claude.Follow(r.Context(), r.PathValue("sid"), offset, wait)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		s.fail(w, err)
		return
	}
	out := ClaudeTranscript{Entries: c.Entries, Next: c.Next, Size: c.Size, Skipped: c.Skipped, Live: c.Live}
	if out.Entries == nil {
		out.Entries = []claudesessions.Entry{}
	}
	writeJSON(w, http.StatusOK, out)
}
