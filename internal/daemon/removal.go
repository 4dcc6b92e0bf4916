package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/cgroup"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/project"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// removal is the one place a project's removal is carried out (the API's
// DELETE /api/projects/{id} calls Remove), in this order: a checkpoint of
// each agent's workspace (C18; one of a worktree that fails refuses the
// removal, nothing done); the registry
// forgets it (its row and approved team, its watcher); the feed says
// project.removed; the runtime stops its agents and deletes its kept
// message files; the memory index forgets it; its running tasks are
// killed (nobody is left to hear of them) and its agents' cgroups
// removed; its messages go at once (the
// retention goroutine is poked); its agents' worktrees that hold no
// uncommitted work are removed, the others kept, branches always kept,
// each said in the answer and the log.
type removal struct {
	ctx      context.Context // the daemon's: the cleanup outlives the request
	log      *slog.Logger
	reg      *project.Registry
	hub      *events.Hub
	rt       *runtime.Runtime
	notes    *memory.Store
	tasks    *task.Manager
	trees    *worktree.Manager
	cgroups  *cgroup.Manager
	cps      checkpoints
	pruneNow chan<- struct{}
}

// Remove removes project id; see removal.
func (r *removal) Remove(ctx context.Context, id troupe.ProjectID) (api.RemoveProjectResponse, error) {
	info, known := r.reg.Get(id)
	if known {
		if err := r.checkpointAll(ctx, id, info.Path); err != nil {
			return api.RemoveProjectResponse{}, err
		}
	}
	if err := r.reg.Remove(ctx, id); err != nil {
		return api.RemoveProjectResponse{}, err
	}
	r.hub.Publish(troupe.RuntimeKey{Project: id}, events.ProjectRemoved{Project: id})
	r.rt.ProjectRemoved(id)
	r.notes.Forget(id)
	killTasks(r.ctx, r.log, r.tasks, id)
	r.cgroups.RemoveProject(id)
	select {
	case r.pruneNow <- struct{}{}:
	default:
	}
	res := api.RemoveProjectResponse{Worktrees: []worktree.Removal{}}
	if !known {
		return res, nil
	}
	// It finishes even when the caller hangs up: a half-done cleanup
	// would be told to nobody.
	res, err := r.trees.RemoveProject(context.WithoutCancel(ctx), id, info.Path)
	if err != nil {
		r.log.Error("remove the project's worktrees", "project", id, "err", err)
		return api.RemoveProjectResponse{Worktrees: []worktree.Removal{}}, nil
	}
	for _, rm := range res.Worktrees {
		if rm.Removed {
			r.log.Info("worktree removed with its project; branch kept", "project", id, "agent", rm.Agent, "path", rm.Path, "branch", rm.Branch)
		} else {
			r.log.Warn("worktree kept after its project was removed", "project", id, "agent", rm.Agent, "path", rm.Path, "branch", rm.Branch, "reason", rm.Reason)
		}
	}
	return res, nil
}

// checkpointAll makes a checkpoint ("project remove") of each workspace of
// project id (folder dir) before it goes: each worktree there (the team's
// and those kept of agents removed from it), and the folder for each
// agent working in it. One of a worktree that fails is an error (its
// folder may be deleted next); one of the folder, which stays, is logged.
// A folder not in a git repository has none.
func (r *removal) checkpointAll(ctx context.Context, id troupe.ProjectID, dir string) error {
	const reason = "project remove"
	team := r.reg.Agents(id)
	for _, a := range team {
		if a.Workspace == worktree.Worktree {
			continue
		}
		k := troupe.RuntimeKey{Project: id, Agent: a.Name}
		if _, err := r.cps.Save(ctx, k, dir, reason); err != nil && !errors.Is(err, worktree.ErrNoCheckpoints) {
			r.log.Warn("no checkpoint of the project folder before its removal", "project", id, "agent", a.Name, "err", err)
		}
	}
	trees, err := r.trees.List(ctx, id, dir, team)
	if err != nil {
		return fmt.Errorf("list the project's worktrees to checkpoint them: %w: the project was not removed", err)
	}
	for _, wt := range trees.Worktrees {
		if !wt.Exists {
			continue
		}
		k := troupe.RuntimeKey{Project: id, Agent: wt.Agent}
		if _, err := r.cps.Save(ctx, k, wt.Path, reason); err != nil && !errors.Is(err, worktree.ErrNoCheckpoints) {
			return fmt.Errorf("checkpoint the worktree of %s before the project's removal: %w: the project was not removed; try again", wt.Agent, err)
		}
	}
	return nil
}
