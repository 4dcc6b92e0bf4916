package client

import (
	"context"
	"net/url"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Diff returns agent's changes in its worktree against its base,
// uncommitted and new files included (tool configuration first, listed);
// stat: a summary.
func (c *Client) Diff(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, stat bool) (api.DiffResponse, error) {
	path := agentPath(p, agent) + "/diff"
	if stat {
		path += "?stat=1"
	}
	var out api.DiffResponse
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Merge commits agent's uncommitted work on its branch and merges the
// branch into the project's current branch; a conflict, tool
// configuration not named in req.IncludeConfig, or a cut diff without
// req.Force is troupe.ErrConflict naming the files, with nothing changed.
func (c *Client) Merge(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, req api.MergeRequest) (api.MergeResponse, error) {
	var out api.MergeResponse
	err := c.do(ctx, "POST", agentPath(p, agent)+"/merge", req, &out)
	return out, err
}

// ResetWorktree puts agent's worktree back at its base.
func (c *Client) ResetWorktree(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID) error {
	return c.do(ctx, "POST", agentPath(p, agent)+"/worktree/reset", nil, nil)
}

// RemoveWorktree deletes agent's worktree folder (its branch stays);
// force drops uncommitted work.
func (c *Client) RemoveWorktree(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, force bool) (api.RemoveWorktreeResponse, error) {
	path := agentPath(p, agent) + "/worktree"
	if force {
		path += "?force=1"
	}
	var out api.RemoveWorktreeResponse
	err := c.do(ctx, "DELETE", path, nil, &out)
	return out, err
}

// Worktrees lists project p's agents' worktrees, orphans included.
func (c *Client) Worktrees(ctx context.Context, p troupe.ProjectID) (api.WorktreeList, error) {
	var out api.WorktreeList
	err := c.do(ctx, "GET", "/api/projects/"+url.PathEscape(string(p))+"/worktrees", nil, &out)
	return out, err
}

// RemoveProjectReport unregisters project id, as RemoveProject does, and
// says what became of its agents' worktrees.
func (c *Client) RemoveProjectReport(ctx context.Context, id troupe.ProjectID) (api.RemoveProjectResponse, error) {
	var out api.RemoveProjectResponse
	err := c.do(ctx, "DELETE", "/api/projects/"+url.PathEscape(string(id)), nil, &out)
	return out, err
}
