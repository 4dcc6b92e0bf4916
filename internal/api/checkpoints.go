package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Checkpoints is what the API needs of the agents' checkpoints (C18,
// internal/worktree's, under the daemon's retention): work is the agent's
// workspace (checkpointWork). A workspace not in a git repository is
// worktree.ErrNoCheckpoints.
type Checkpoints interface {
	List(ctx context.Context, k troupe.RuntimeKey, work string) ([]worktree.Checkpoint, error)
	Diff(ctx context.Context, k troupe.RuntimeKey, work string, seq int64, stat bool) (worktree.DiffResult, error)
	// Rewind puts the workspace back at checkpoint seq after a checkpoint
	// of the present, which it returns. The caller holds the agent's
	// turns (Runtime.WhileIdle).
	Rewind(ctx context.Context, k troupe.RuntimeKey, work string, seq int64) (worktree.Checkpoint, error)
	// Save makes a checkpoint of the workspace now, before something that
	// may drop work (reason: "worktree reset", "reset"…).
	Save(ctx context.Context, k troupe.RuntimeKey, work, reason string) (worktree.Checkpoint, error)
	// Available is nil when folder dir is in a git repository, so its
	// agents have checkpoints; cheap (troupe agents asks it of each
	// project), no agent's checkpoint waited for.
	Available(ctx context.Context, dir string) error
}

// Checkpoint is one checkpoint of an agent's workspace.
type Checkpoint = worktree.Checkpoint

// CheckpointsResponse lists an agent's checkpoints, oldest first.
type CheckpointsResponse struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
	// Unavailable says why the agent has none: its workspace is not in a
	// git repository (and the fix).
	Unavailable string `json:"unavailable,omitempty"`
}

// RewindRequest names the checkpoint to go back to.
type RewindRequest struct {
	Seq int64 `json:"seq"`
}

// RewindResponse says what a rewind did: Before is the checkpoint of the
// files as they were just before (rewinding to Before.Seq undoes it).
type RewindResponse struct {
	Before Checkpoint `json:"before"`
	Seq    int64      `json:"seq"`
}

// routeCheckpoints registers the routes of agents' checkpoints.
func (s *Server) routeCheckpoints() {
	s.mux.HandleFunc("GET /api/projects/{id}/agents/{agent}/checkpoints", s.checkpointList)
	s.mux.HandleFunc("GET /api/projects/{id}/agents/{agent}/checkpoints/{seq}/diff", s.checkpointDiff)
	s.mux.HandleFunc("POST /api/projects/{id}/agents/{agent}/rewind", s.checkpointRewind)
}

// checkpointAgent resolves the path's agent and its workspace
// (checkpointWork); it answers errors itself. live: the workspace is there
// now (a worktree removed is not: its checkpoints are read from the
// project's folder, the same repository).
func (s *Server) checkpointAgent(w http.ResponseWriter, r *http.Request) (k troupe.RuntimeKey, work string, live, ok bool) {
	if s.o.Checkpoints == nil {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon has no checkpoints")
		return k, "", false, false
	}
	id := troupe.ProjectID(r.PathValue("id"))
	info, known := s.o.Registry.Get(id)
	if !known {
		writeError(w, http.StatusNotFound, "not_found", "project "+string(id)+" is not registered: see `troupe project list`")
		return k, "", false, false
	}
	k = troupe.RuntimeKey{Project: id, Agent: troupe.AgentID(r.PathValue("agent"))}
	work, live, found := s.checkpointWork(k, info.Path)
	if !found {
		s.noAgent(w, k)
		return k, "", false, false
	}
	return k, work, live, true
}

// checkpointWork is agent k's workspace in project folder dir: its
// worktree (workspace = "worktree", or one kept of an agent removed from
// the team), else dir. live: the worktree exists (dir always does); a
// worktree removed gives dir, whose repository holds its checkpoints
// too. found: k is in the team or has a kept worktree.
func (s *Server) checkpointWork(k troupe.RuntimeKey, dir string) (work string, live, found bool) {
	spec, _, inTeam := s.o.Registry.Agent(k)
	tree := ""
	switch {
	case s.o.Worktrees == nil:
	case inTeam && spec.Workspace == worktree.Worktree:
		tree = s.o.Worktrees.Path(k)
	case !inTeam:
		if p, kept := s.o.Worktrees.Kept(k); kept {
			tree, inTeam = p, true
		}
	}
	if !inTeam {
		return "", false, false
	}
	if tree == "" {
		return dir, true, true
	}
	if _, err := os.Stat(filepath.Join(tree, ".git")); err != nil {
		return dir, false, true
	}
	return tree, true, true
}

// checkpointList answers the agent's checkpoints, oldest first; a
// workspace not in a git repository has none and says why (200).
func (s *Server) checkpointList(w http.ResponseWriter, r *http.Request) {
	k, work, _, ok := s.checkpointAgent(w, r)
	if !ok {
		return
	}
	list, err := s.o.Checkpoints.List(r.Context(), k, work)
	if errors.Is(err, worktree.ErrNoCheckpoints) {
		writeJSON(w, http.StatusOK, CheckpointsResponse{Checkpoints: []worktree.Checkpoint{}, Unavailable: worktree.ErrNoCheckpoints.Error()})
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	if list == nil {
		list = []worktree.Checkpoint{}
	}
	writeJSON(w, http.StatusOK, CheckpointsResponse{Checkpoints: list})
}

// checkpointSeq reads the checkpoint's number from the path or the body;
// it answers errors itself.
func checkpointSeq(w http.ResponseWriter, field, v string) (int64, bool) {
	seq, err := strconv.ParseInt(v, 10, 64)
	if err != nil || seq < 1 {
		writeError(w, http.StatusBadRequest, "invalid", field+": "+strconv.Quote(v)+" is not a checkpoint's number (1 or more): troupe checkpoints AGENT lists them")
		return 0, false
	}
	return seq, true
}

// checkpointDiff answers what checkpoint seq changed (from the snapshot
// it is compared with: its turn's start, or the checkpoint before);
// ?stat=1 for a summary.
func (s *Server) checkpointDiff(w http.ResponseWriter, r *http.Request) {
	k, work, _, ok := s.checkpointAgent(w, r)
	if !ok {
		return
	}
	seq, ok := checkpointSeq(w, "seq", r.PathValue("seq"))
	if !ok {
		return
	}
	stat, _ := strconv.ParseBool(r.URL.Query().Get("stat"))
	d, err := s.o.Checkpoints.Diff(r.Context(), k, work, seq, stat)
	if err != nil {
		s.failCheckpoint(w, k, err)
		return
	}
	writeJSON(w, http.StatusOK, DiffResponse{Diff: d.Diff, Config: d.Config, Cut: d.Cut, Tree: d.Tree, MergeCommand: d.MergeCommand})
}

// checkpointRewind puts the agent's workspace back at checkpoint seq,
// after a checkpoint of the present (its number in the answer: rewinding
// to it undoes the rewind). Refused (409) while the agent is in a turn;
// no turn starts while it runs.
func (s *Server) checkpointRewind(w http.ResponseWriter, r *http.Request) {
	k, work, live, ok := s.checkpointAgent(w, r)
	if !ok {
		return
	}
	var req RewindRequest
	if !decode(w, r, &req) {
		return
	}
	if _, ok := checkpointSeq(w, "seq", strconv.FormatInt(req.Seq, 10)); !ok {
		return
	}
	if !live {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("agent %s has no worktree now (removed): its next turn makes one again, then rewind; or read the files with troupe diff %s --turn %d", k.Agent, k.Agent, req.Seq))
		return
	}
	rt, ok := s.runtime(w)
	if !ok {
		return
	}
	var before worktree.Checkpoint
	err := rt.WhileIdle(r.Context(), k, func(ctx context.Context) error {
		var err error
		before, err = s.o.Checkpoints.Rewind(ctx, k, work, req.Seq)
		return err
	})
	if err != nil {
		s.failCheckpoint(w, k, err)
		return
	}
	s.log.Info("workspace rewound by the person", "project", k.Project, "agent", k.Agent, "to", req.Seq, "before", before.Seq)
	writeJSON(w, http.StatusOK, RewindResponse{Before: before, Seq: req.Seq})
}

// failCheckpoint is fail, a workspace without checkpoints a conflict
// that says why.
func (s *Server) failCheckpoint(w http.ResponseWriter, k troupe.RuntimeKey, err error) {
	if errors.Is(err, worktree.ErrNoCheckpoints) {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("agent %s's workspace is %v", k.Agent, err))
		return
	}
	s.fail(w, err)
}

// saveCheckpoint makes a checkpoint of agent k's workspace in project
// folder dir before an operation that may drop work (reason): a workspace
// not in a git repository, or not there, has none to make (nil).
func (s *Server) saveCheckpoint(ctx context.Context, k troupe.RuntimeKey, dir, reason string) error {
	if s.o.Checkpoints == nil {
		return nil
	}
	work, live, found := s.checkpointWork(k, dir)
	if !found || !live {
		return nil
	}
	cp, err := s.o.Checkpoints.Save(ctx, k, work, reason)
	if errors.Is(err, worktree.ErrNoCheckpoints) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s's workspace before the %s: %w", k.Agent, reason, err)
	}
	s.log.Info("checkpoint made", "project", k.Project, "agent", k.Agent, "reason", reason, "seq", cp.Seq)
	return nil
}
