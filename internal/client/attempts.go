package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func attemptsPath(p troupe.ProjectID) string {
	return "/api/projects/" + url.PathEscape(string(p)) + "/attempts"
}

// StartAttempt gives r's task to r's agents of project p and returns the
// attempt, running.
func (c *Client) StartAttempt(ctx context.Context, p troupe.ProjectID, r api.AttemptRequest) (api.Attempt, error) {
	var a api.Attempt
	err := c.do(ctx, "POST", attemptsPath(p), r, &a)
	return a, err
}

// Attempts lists project p's attempts, newest first (limit 0: all kept).
func (c *Client) Attempts(ctx context.Context, p troupe.ProjectID, limit int) ([]api.Attempt, error) {
	path := attemptsPath(p)
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var as []api.Attempt
	err := c.do(ctx, "GET", path, nil, &as)
	return as, err
}

// Attempt returns attempt id of project p.
func (c *Client) Attempt(ctx context.Context, p troupe.ProjectID, id int64) (api.Attempt, error) {
	var a api.Attempt
	err := c.do(ctx, "GET", attemptsPath(p)+"/"+strconv.FormatInt(id, 10), nil, &a)
	return a, err
}

// DiscardAttempt resets the worktrees of attempt id's losers.
func (c *Client) DiscardAttempt(ctx context.Context, p troupe.ProjectID, id int64) (api.DiscardAttemptResponse, error) {
	var r api.DiscardAttemptResponse
	err := c.do(ctx, "POST", attemptsPath(p)+"/"+strconv.FormatInt(id, 10)+"/discard", nil, &r)
	return r, err
}
