package client

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Reset gives agent a new conversation: its stored conversation id is
// forgotten and its live session closed now (a turn in flight fails).
func (c *Client) Reset(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID) error {
	return c.do(ctx, "POST", agentPath(p, agent)+"/reset", nil, nil)
}

// Interrupt stops agent's turn in flight; it fails with troupe.ErrConflict
// when there is none.
func (c *Client) Interrupt(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID) error {
	return c.do(ctx, "POST", agentPath(p, agent)+"/interrupt", nil, nil)
}

// Permissions lists the permission requests that wait on the person, in
// project p ("" for every project), oldest first.
func (c *Client) Permissions(ctx context.Context, p troupe.ProjectID) ([]troupe.Permission, error) {
	path := "/api/permissions"
	if p != "" {
		path += "?project=" + url.QueryEscape(string(p))
	}
	var ps []troupe.Permission
	err := c.do(ctx, "GET", path, nil, &ps)
	return ps, err
}

// PermissionInput reads a pending request's whole input, page by page.
func (c *Client) PermissionInput(ctx context.Context, id troupe.PermissionID) (string, error) {
	var b strings.Builder
	for {
		var pg api.PermissionInput
		path := fmt.Sprintf("/api/permissions/%s/input?offset=%d", url.PathEscape(string(id)), b.Len())
		if err := c.do(ctx, "GET", path, nil, &pg); err != nil {
			return "", err
		}
		b.WriteString(pg.Input)
		if pg.Input == "" || b.Len() >= pg.Size {
			return b.String(), nil
		}
	}
}

// Allow allows a pending permission request.
func (c *Client) Allow(ctx context.Context, id troupe.PermissionID) (troupe.Permission, error) {
	var out troupe.Permission
	err := c.do(ctx, "POST", "/api/permissions/"+url.PathEscape(string(id))+"/allow", nil, &out)
	return out, err
}

// Deny denies a pending permission request; reason (optional) is shown to
// the agent.
func (c *Client) Deny(ctx context.Context, id troupe.PermissionID, reason string) (troupe.Permission, error) {
	var out troupe.Permission
	err := c.do(ctx, "POST", "/api/permissions/"+url.PathEscape(string(id))+"/deny", api.DenyRequest{Reason: reason}, &out)
	return out, err
}
