package client

import (
	"context"
	"net/url"

	"github.com/troupe-dev/troupe/internal/api"
)

// Runners lists every runner with credentials, connected or not, by name.
func (c *Client) Runners(ctx context.Context) ([]api.RunnerInfo, error) {
	var out []api.RunnerInfo
	err := c.do(ctx, "GET", "/api/runners", nil, &out)
	return out, err
}

// AddRunner mints the credentials of a new runner: the answer holds the
// creds file's text, which the daemon shows this once.
func (c *Client) AddRunner(ctx context.Context, name string) (api.RunnerCreds, error) {
	var out api.RunnerCreds
	err := c.do(ctx, "POST", "/api/runners", api.AddRunnerRequest{Name: name}, &out)
	return out, err
}

// RevokeRunner ends a runner's credentials.
func (c *Client) RevokeRunner(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/api/runners/"+url.PathEscape(name), nil, nil)
}
