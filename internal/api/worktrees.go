package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Worktrees is what the API needs of internal/worktree.
type Worktrees interface {
	Diff(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, stat bool) (worktree.DiffResult, error)
	Merge(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, opt worktree.MergeOptions) (worktree.MergeResult, error)
	Reset(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) error
	Remove(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string, force bool) error
	Path(k troupe.RuntimeKey) string
	Kept(k troupe.RuntimeKey) (string, bool)
	List(ctx context.Context, p troupe.ProjectID, dir string, team []troupe.AgentSpec) (worktree.ListResult, error)
}

// WorktreeList is a project's agents' worktrees, orphans (agents no
// longer in the team) included.
type WorktreeList = worktree.ListResult

// RemoveProjectResponse says what removing a project did with its agents'
// worktrees: clean ones removed, those with uncommitted work kept,
// branches always kept.
type RemoveProjectResponse = worktree.RemoveResult

// DiffResponse is an agent's changes against its base.
type DiffResponse struct {
	// Diff is git's patch or summary: tool configuration first, as text.
	Diff string `json:"diff"`
	// Config lists the changed files that are tool configuration
	// (worktree.IsToolConfig): a merge needs each named in include_config.
	Config []string `json:"config"`
	// Cut: Diff is the start of a longer diff (its last line says how
	// much more); a merge needs force.
	Cut bool `json:"cut"`
	// Tree names the work shown (a git tree): a merge given it merges
	// only that work.
	Tree string `json:"tree"`
	// MergeCommand is the troupe merge that merges exactly this work,
	// its tool configuration named (and --force when cut).
	MergeCommand string `json:"merge_command"`
	// Outlook, for an agent's worktree diff: where its branch stands
	// against its base (the diff is against its fork point) and what a
	// merge of this work would do now. Absent for a checkpoint's diff.
	Outlook *worktree.Outlook `json:"outlook,omitempty"`
}

// MergeRequest is what the person allows a merge (the body is optional).
type MergeRequest struct {
	// IncludeConfig names the tool configuration files the merge may
	// change (DiffResponse.Config); any other is refused (409).
	IncludeConfig []string `json:"include_config,omitempty"`
	// Force merges even when the diff is cut.
	Force bool `json:"force,omitempty"`
	// Tree is the DiffResponse.Tree the person read: 409 when the
	// agent's work has changed since.
	Tree string `json:"tree,omitempty"`
}

// RemoveWorktreeResponse says what removing a worktree kept.
type RemoveWorktreeResponse struct {
	Path   string `json:"path"`   // the folder removed
	Branch string `json:"branch"` // kept
}

// routeWorktrees registers the routes of agents' worktrees.
func (s *Server) routeWorktrees() {
	s.mux.HandleFunc("GET /api/projects/{id}/agents/{agent}/diff", s.worktreeDiff)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/merge", s.worktreeMerge)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/worktree/reset", s.worktreeReset)
	s.mux.HandleFunc("DELETE /api/projects/{id}/agents/{agent}/worktree", s.worktreeRemove)
	s.mux.HandleFunc("GET /api/projects/{id}/worktrees", s.worktreeList)
}

// worktreeList answers the project's worktrees: each agent's with
// workspace = "worktree" (made or not yet) and orphans.
func (s *Server) worktreeList(w http.ResponseWriter, r *http.Request) {
	if s.o.Worktrees == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon has no worktrees")
		return
	}
	id := troupe.ProjectID(r.PathValue("id"))
	info, ok := s.o.Registry.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return
	}
	res, err := s.o.Worktrees.List(r.Context(), id, info.Path, s.o.Registry.Agents(id))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// worktreeAgent resolves the path's agent, its definition and its
// project's folder; it answers errors itself.
func (s *Server) worktreeAgent(w http.ResponseWriter, r *http.Request) (troupe.RuntimeKey, troupe.AgentSpec, string, bool) {
	if s.o.Worktrees == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon has no worktrees")
		return troupe.RuntimeKey{}, troupe.AgentSpec{}, "", false
	}
	id := troupe.ProjectID(r.PathValue("id"))
	if _, ok := s.o.Registry.Get(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return troupe.RuntimeKey{}, troupe.AgentSpec{}, "", false
	}
	k := troupe.RuntimeKey{Project: id, Agent: troupe.AgentID(r.PathValue("agent"))}
	spec, dir, ok := s.worktreeOf(k)
	if !ok {
		s.noAgent(w, k)
		return k, spec, "", false
	}
	return k, spec, dir, true
}

// worktreeOf is agent k's definition and its project's folder; false
// when k is neither in the team nor has a worktree kept.
func (s *Server) worktreeOf(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	spec, dir, ok := s.o.Registry.Agent(k)
	if ok {
		return spec, dir, true
	}
	// An agent removed from the team keeps its worktree: it can still
	// be diffed, merged and removed, counted from the project's HEAD.
	if _, kept := s.o.Worktrees.Kept(k); kept {
		info, _ := s.o.Registry.Get(k.Project)
		return troupe.AgentSpec{Name: k.Agent, Workspace: worktree.Worktree}, info.Path, true
	}
	return spec, "", false
}

// worktreeDiff answers the agent's changes against its base, uncommitted
// and new files included; ?stat=1 for a summary.
func (s *Server) worktreeDiff(w http.ResponseWriter, r *http.Request) {
	k, spec, dir, ok := s.worktreeAgent(w, r)
	if !ok {
		return
	}
	stat, _ := strconv.ParseBool(r.URL.Query().Get("stat"))
	d, err := s.o.Worktrees.Diff(r.Context(), k, spec, dir, stat)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, DiffResponse{Diff: d.Diff, Config: d.Config, Cut: d.Cut, Tree: d.Tree, MergeCommand: d.MergeCommand, Outlook: &d.Outlook})
}

// worktreeMerge merges the agent's branch into the project's current
// branch; 409 naming the files when it would conflict, change tool
// configuration not named in include_config, or the diff is cut without
// force (nothing changed).
func (s *Server) worktreeMerge(w http.ResponseWriter, r *http.Request) {
	k, spec, dir, ok := s.worktreeAgent(w, r)
	if !ok {
		return
	}
	var req MergeRequest
	if !decodeOptional(w, r, &req) {
		return
	}
	res, err := s.o.Worktrees.Merge(r.Context(), k, spec, dir, worktree.MergeOptions{IncludeConfig: req.IncludeConfig, Force: req.Force, Tree: req.Tree})
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// worktreeReset puts the worktree back at its base, after a checkpoint
// of it (refused when that fails). 204.
func (s *Server) worktreeReset(w http.ResponseWriter, r *http.Request) {
	k, spec, dir, ok := s.worktreeAgent(w, r)
	if !ok {
		return
	}
	if err := s.resetWorktree(r.Context(), k, spec, dir); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resetWorktree is the person's reset of agent k's worktree (the CLI's
// and an attempt's discard): a checkpoint of it first, then the reset.
func (s *Server) resetWorktree(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) error {
	if err := s.saveCheckpoint(ctx, k, dir, "worktree reset"); err != nil {
		return fmt.Errorf("%w: the worktree was not reset", err)
	}
	return s.o.Worktrees.Reset(ctx, k, spec, dir)
}

// worktreeRemove deletes the worktree folder, keeping its branch, after a
// checkpoint of it (refused when that fails); ?force=1 drops uncommitted
// work (kept in that checkpoint).
func (s *Server) worktreeRemove(w http.ResponseWriter, r *http.Request) {
	k, spec, dir, ok := s.worktreeAgent(w, r)
	if !ok {
		return
	}
	force, _ := strconv.ParseBool(r.URL.Query().Get("force"))
	if err := s.saveCheckpoint(r.Context(), k, dir, "worktree remove"); err != nil {
		s.fail(w, fmt.Errorf("%w: the worktree was not removed", err))
		return
	}
	if err := s.o.Worktrees.Remove(r.Context(), k, spec, dir, force); err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, RemoveWorktreeResponse{Path: s.o.Worktrees.Path(k), Branch: worktree.Branch(k.Agent)})
}

// MergeResponse is what a merge did.
type MergeResponse = worktree.MergeResult
