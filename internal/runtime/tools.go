package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Tools returns the troupe tools bound to k: every call acts as k and
// resolves names inside k's project only (C2).
func (r *Runtime) Tools(k troupe.RuntimeKey) engine.Tools { return toolHost{r: r, key: k} }

type toolHost struct {
	r   *Runtime
	key troupe.RuntimeKey
}

// ToolNames lists the tools the runtime serves.
var ToolNames = []string{"ask_agent", "send_message", "delegate", "reply", "list_agents"}

// Call implements engine.Tools.
func (h toolHost) Call(ctx context.Context, tool string, args json.RawMessage) (string, error) {
	switch tool {
	case "ask_agent":
		var in struct {
			To          string  `json:"to"`
			Question    string  `json:"question"`
			WaitSeconds float64 `json:"wait_seconds"`
		}
		if err := decodeArgs(args, &in, "to", "question"); err != nil {
			return "", err
		}
		req, err := h.r.Ask(ctx, h.target(in.To), h.key.Agent, in.Question, time.Duration(in.WaitSeconds*float64(time.Second)))
		if err != nil {
			return "", err
		}
		switch req.State {
		case troupe.ReqAnswered:
			return req.Answer, nil
		case troupe.ReqPending:
			return fmt.Sprintf("%s has not answered yet (request %s). The answer will arrive in your inbox as a reply message; carry on meanwhile.", in.To, req.ID), nil
		}
		return "", errors.New(req.Error)
	case "send_message":
		var in struct{ To, Text string }
		if err := decodeArgs(args, &in, "to", "text"); err != nil {
			return "", err
		}
		m, err := h.r.Send(ctx, h.target(in.To), h.key.Agent, troupe.KindMessage, in.Text)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("sent to %s (message %d); it reads it at the end of its current turn", in.To, m.ID), nil
	case "delegate":
		var in struct{ To, Task string }
		if err := decodeArgs(args, &in, "to", "task"); err != nil {
			return "", err
		}
		req, err := h.r.Delegate(ctx, h.target(in.To), h.key.Agent, in.Task)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("delegated to %s as request %s; its result will arrive in your inbox and wake you", in.To, req.ID), nil
	case "reply":
		var in struct{ Text string }
		if err := decodeArgs(args, &in, "text"); err != nil {
			return "", err
		}
		return "your answer was delivered", h.r.Reply(ctx, h.key, in.Text)
	case "list_agents":
		if err := decodeArgs(args, &struct{}{}); err != nil {
			return "", err
		}
		type row struct {
			Name   troupe.AgentID    `json:"name"`
			Engine troupe.Engine     `json:"engine"`
			State  troupe.AgentState `json:"state"`
			You    bool              `json:"you,omitempty"`
		}
		var rows []row
		for _, a := range h.r.o.Teams.Agents(h.key.Project) {
			st, _ := h.r.AgentState(troupe.RuntimeKey{Project: h.key.Project, Agent: a.Name})
			rows = append(rows, row{a.Name, a.Engine, st, a.Name == h.key.Agent})
		}
		b, _ := json.Marshal(rows)
		return string(b), nil
	}
	return "", fmt.Errorf("unknown tool %q: the tools are %s", tool, strings.Join(ToolNames, ", "))
}

func (h toolHost) target(name string) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: h.key.Project, Agent: troupe.AgentID(name)}
}

// decodeArgs decodes tool arguments strictly and names missing fields.
func decodeArgs(args json.RawMessage, v any, required ...string) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	var present map[string]json.RawMessage
	_ = json.Unmarshal(args, &present)
	for _, f := range required {
		if raw, ok := present[f]; !ok || string(raw) == `""` || string(raw) == "null" {
			return fmt.Errorf("missing argument %q", f)
		}
	}
	return nil
}

// Reply answers, with text, the ask that k's current turn is handling.
func (r *Runtime) Reply(ctx context.Context, k troupe.RuntimeKey, text string) error {
	a := r.actor(k)
	var t *turn
	if a != nil {
		t = a.currentTurn()
	}
	if t != nil {
		for _, m := range t.msgs {
			if m.Kind == troupe.KindAsk || m.Kind == troupe.KindDelegate {
				r.finish(ctx, m.Request, troupe.ReqAnswered, text, "")
				return nil
			}
		}
	}
	return errors.New("there is no question to answer in this turn: reply answers an ask_agent question you were given; to write to an agent, use send_message")
}
