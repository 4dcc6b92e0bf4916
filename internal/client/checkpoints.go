package client

import (
	"context"
	"strconv"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Checkpoints lists agent's checkpoints, oldest first; a workspace not in
// a git repository has none, and Unavailable says why.
func (c *Client) Checkpoints(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID) (api.CheckpointsResponse, error) {
	var out api.CheckpointsResponse
	err := c.do(ctx, "GET", agentPath(p, agent)+"/checkpoints", nil, &out)
	return out, err
}

// CheckpointDiff is what agent's checkpoint seq changed (a turn's: what
// that turn changed on disk); stat: a summary.
func (c *Client) CheckpointDiff(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, seq int64, stat bool) (api.DiffResponse, error) {
	path := agentPath(p, agent) + "/checkpoints/" + strconv.FormatInt(seq, 10) + "/diff"
	if stat {
		path += "?stat=1"
	}
	var out api.DiffResponse
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Rewind puts agent's workspace back at checkpoint seq, after a
// checkpoint of the present (Before: rewinding to it undoes this); the
// agent in a turn is troupe.ErrConflict.
func (c *Client) Rewind(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, seq int64) (api.RewindResponse, error) {
	var out api.RewindResponse
	err := c.do(ctx, "POST", agentPath(p, agent)+"/rewind", api.RewindRequest{Seq: seq}, &out)
	return out, err
}
