package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"

	"github.com/coder/websocket"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Attachment is the person's end of an agent's terminal (GET
// .../agents/{agent}/terminal over a WebSocket; see internal/api's
// terminal.go for the messages).
type Attachment struct {
	c *websocket.Conn
	// Cols and Rows are the terminal's size when attached.
	Cols, Rows int
}

// AttachTerminal attaches to agent's terminal (starting its session if it
// is stopped). The first Read returns the screen as it is.
func (c *Client) AttachTerminal(ctx context.Context, p troupe.ProjectID, agent troupe.AgentID) (*Attachment, error) {
	u := "ws" + strings.TrimPrefix(c.base, "http") + agentPath(p, agent) + "/terminal"
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.token)
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, HTTPClient: c.hc})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			var e api.Error
			if resp.Body != nil {
				json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
			}
			if e.Error == "" {
				e.Error = resp.Status
			}
			return nil, &Error{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, notRunning(c.dir)
		}
		return nil, fmt.Errorf("attach to %s: %w", agent, err)
	}
	conn.SetReadLimit(4 << 20)
	typ, b, err := conn.Read(ctx)
	var hello struct {
		Type       string `json:"type"`
		Cols, Rows int
	}
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &hello) != nil || hello.Type != "attached" {
		conn.CloseNow()
		return nil, fmt.Errorf("attach to %s: the daemon did not say attached (%v)", agent, err)
	}
	return &Attachment{c: conn, Cols: hello.Cols, Rows: hello.Rows}, nil
}

// Read returns the next output of the program (the first is the screen as
// it was at attach). When the daemon ends the attachment it returns an
// error holding the reason it gave.
func (a *Attachment) Read(ctx context.Context) ([]byte, error) {
	for {
		typ, b, err := a.c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Reason == "" {
					return nil, io.EOF
				}
				return nil, fmt.Errorf("detached: %s: %w", ce.Reason, io.EOF)
			}
			return nil, err
		}
		if typ == websocket.MessageBinary {
			return b, nil
		}
	}
}

// Type sends keys to the program.
func (a *Attachment) Type(ctx context.Context, keys []byte) error {
	return a.c.Write(ctx, websocket.MessageBinary, keys)
}

// Resize resizes the agent's terminal.
func (a *Attachment) Resize(ctx context.Context, cols, rows int) error {
	b, _ := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
	return a.c.Write(ctx, websocket.MessageText, b)
}

// Close detaches; the agent goes on.
func (a *Attachment) Close() error {
	return a.c.Close(websocket.StatusNormalClosure, "")
}
