package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// TerminalRuntime is implemented by a Runtime whose agents may run in
// terminal mode (internal/runtime): the terminal of an agent's session,
// started if it is stopped.
type TerminalRuntime interface {
	Terminal(ctx context.Context, k troupe.RuntimeKey) (engine.Terminal, error)
}

// Terminal attach, over a WebSocket (GET with Upgrade):
//
//	server → client: a text message {"type":"attached","cols":C,"rows":R},
//	  then binary messages: first the screen as it is (a redraw), then the
//	  program's output as it comes. When the server ends the attachment it
//	  closes with a reason (the program ended, the viewer fell behind).
//	client → server: binary messages are keys for the program; a text
//	  message {"type":"resize","cols":C,"rows":R} resizes the terminal.
//
// The team keeps working while a person is attached; while they type, the
// agent's queued turns wait (their input is written at the next idle
// moment after the person stopped typing for a few seconds).
type termControl struct {
	Type string `json:"type"`
	Cols int    `json:"cols,omitempty"`
	Rows int    `json:"rows,omitempty"`
}

// Bounds of an attachment.
const (
	maxTermMessage = 64 << 10 // one client message (keys, a resize)
	termWriteLimit = 10 * time.Second
)

func (s *Server) routeTerminal() {
	s.mux.HandleFunc("GET /api/projects/{id}/agents/{agent}/terminal", s.attachTerminal)
}

func (s *Server) attachTerminal(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r)
	if !ok {
		return
	}
	tr, ok := s.o.Runtime.(TerminalRuntime)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "internal", "this daemon runs no terminal agents")
		return
	}
	t, err := tr.Terminal(r.Context(), k)
	if err != nil {
		s.fail(w, err)
		return
	}
	v, err := t.Attach()
	if err != nil {
		writeError(w, http.StatusConflict, "conflict", "attach to "+string(k.Agent)+": "+err.Error())
		return
	}
	defer v.Detach()
	// Host and Origin were checked by ServeHTTP's guards (C12), against
	// the daemon's own names; the library's same-origin check would
	// refuse a --public-name origin that those accept.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept wrote the error
	}
	c.SetReadLimit(maxTermMessage)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s.log.Info("person attached to a terminal", "project", k.Project, "agent", k.Agent)
	defer s.log.Info("person detached from a terminal", "project", k.Project, "agent", k.Agent)

	write := func(typ websocket.MessageType, b []byte) error {
		wctx, wcancel := context.WithTimeout(ctx, termWriteLimit)
		defer wcancel()
		return c.Write(wctx, typ, b)
	}
	cols, rows := t.Size()
	hello, _ := json.Marshal(termControl{Type: "attached", Cols: cols, Rows: rows})
	if write(websocket.MessageText, hello) != nil || write(websocket.MessageBinary, v.Snapshot()) != nil {
		return
	}
	// The reader: keys and resizes from the person.
	readErr := make(chan error, 1)
	go func() {
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				readErr <- err
				return
			}
			if typ == websocket.MessageBinary {
				if err := v.Type(ctx, b); err != nil {
					readErr <- err
					return
				}
				continue
			}
			var m termControl
			if json.Unmarshal(b, &m) != nil || m.Type != "resize" {
				continue // unknown controls are ignored
			}
			if err := v.Resize(m.Cols, m.Rows); err != nil {
				s.log.Debug("resize terminal", "err", err)
			}
		}
	}()
	for {
		select {
		case b, ok := <-v.Output():
			if !ok {
				reason := v.Reason()
				if reason == "" {
					reason = "detached"
				}
				c.Close(websocket.StatusNormalClosure, clipReason(reason))
				cancel()
				<-readErr
				return
			}
			if err := write(websocket.MessageBinary, b); err != nil {
				cancel()
				<-readErr
				return
			}
		case err := <-readErr:
			if errors.Is(err, context.Canceled) || websocket.CloseStatus(err) != -1 {
				c.Close(websocket.StatusNormalClosure, "")
			} else {
				c.Close(websocket.StatusPolicyViolation, clipReason(err.Error()))
			}
			return
		}
	}
}

// clipReason fits a close reason in a control frame (123 bytes).
func clipReason(s string) string {
	return clip.Head(s, 120)
}
