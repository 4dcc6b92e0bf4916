package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// AgentLog returns what agent did, newest turn first: turn alone when it
// is not empty, else at most limit turns (0: the daemon's default) older
// than the cursor before (0: from the newest; AgentLog.Before continues).
func (c *Client) AgentLog(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID, turn troupe.TurnID, before int64, limit int) (api.AgentLog, error) {
	q := url.Values{}
	if turn != "" {
		q.Set("turn", string(turn))
	}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := agentPath(p, agent) + "/log"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l api.AgentLog
	err := c.do(ctx, "GET", path, nil, &l)
	return l, err
}
