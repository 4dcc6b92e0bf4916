package client

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// ClaudeQuery filters ClaudeSessions.
type ClaudeQuery struct {
	Live    bool
	Project string // a folder: sessions that started in it or inside it
	Search  string
	Limit   int
}

// ClaudeSessions lists the machine's Claude Code sessions, newest first.
func (c *Client) ClaudeSessions(ctx context.Context, q ClaudeQuery) (api.ClaudeSessionList, error) {
	v := url.Values{}
	if q.Live {
		v.Set("live", "1")
	}
	if q.Project != "" {
		v.Set("project", q.Project)
	}
	if q.Search != "" {
		v.Set("search", q.Search)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/api/claude-sessions"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out api.ClaudeSessionList
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

func claudePath(id string) string { return "/api/claude-sessions/" + url.PathEscape(id) }

// ClaudeSession returns one session, its liveness checked now.
func (c *Client) ClaudeSession(ctx context.Context, id string) (api.ClaudeSession, error) {
	var out api.ClaudeSession
	err := c.do(ctx, "GET", claudePath(id), nil, &out)
	return out, err
}

// ClaimClaudeSession holds a dead session for a resume that process pid
// runs; a live or held one is troupe.ErrConflict with the reason and the
// alternatives (C9).
func (c *Client) ClaimClaudeSession(ctx context.Context, id string, pid int) (api.ClaimResponse, error) {
	var out api.ClaimResponse
	err := c.do(ctx, "POST", claudePath(id)+"/claim", api.ClaimRequest{PID: pid}, &out)
	return out, err
}

// ReleaseClaudeSession ends a claim.
func (c *Client) ReleaseClaudeSession(ctx context.Context, id, claim string) error {
	return c.do(ctx, "DELETE", claudePath(id)+"/claim/"+url.PathEscape(claim), nil, nil)
}

// HandOffClaudeSession makes a dead session the conversation agent's next
// session resumes.
func (c *Client) HandOffClaudeSession(ctx context.Context, id string, p troupe.ProjectID, agent troupe.AgentID) (api.ClaudeSession, error) {
	var out api.ClaudeSession
	err := c.do(ctx, "POST", claudePath(id)+"/hand-off", api.HandOffRequest{Project: p, Agent: agent}, &out)
	return out, err
}

// ClaudeTranscript reads a session's transcript from offset, waiting up to
// wait for it to grow when nothing new is there.
func (c *Client) ClaudeTranscript(ctx context.Context, id string, offset int64, wait time.Duration) (api.ClaudeTranscript, error) {
	var out api.ClaudeTranscript
	err := c.do(ctx, "GET", claudePath(id)+"/transcript?offset="+strconv.FormatInt(offset, 10)+"&wait="+wait.String(), nil, &out)
	return out, err
}
