package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// Tools returns the troupe tools bound to k: every call acts as k and
// resolves names inside k's project only (C2).
func (r *Runtime) Tools(k troupe.RuntimeKey) engine.Tools { return toolHost{r: r, key: k} }

// ToolsWithLimit is Tools for a caller whose tool calls are cut after
// limit (an MCP client's tool timeout): an ask waits at most limit, then
// returns a request id and the answer goes to the caller's inbox (C4).
func (r *Runtime) ToolsWithLimit(k troupe.RuntimeKey, limit time.Duration) engine.Tools {
	return toolHost{r: r, key: k, limit: limit}
}

type toolHost struct {
	r     *Runtime
	key   troupe.RuntimeKey
	limit time.Duration // 0: none
}

// Services answers the tools the runtime does not own (background tasks,
// memory notes). The daemon wires it; nil means those tools are not served.
type Services interface {
	Call(ctx context.Context, k troupe.RuntimeKey, tool string, args json.RawMessage) (string, error)
}

func toolNames() string {
	var names []string
	for _, t := range Catalog {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// Call implements engine.Tools.
func (h toolHost) Call(ctx context.Context, tool string, args json.RawMessage) (string, error) {
	if a := h.r.actor(h.key); a != nil {
		defer a.toolCall()()
	}
	switch tool {
	case "ask_agent":
		var in struct {
			To          string  `json:"to"`
			Question    string  `json:"question"`
			WaitSeconds float64 `json:"wait_seconds"`
		}
		if err := DecodeArgs(args, &in, "to", "question"); err != nil {
			return "", err
		}
		if in.WaitSeconds < 0 {
			return "", fmt.Errorf("bad argument wait_seconds: %v is negative: give 0 to wait for the answer", in.WaitSeconds)
		}
		wait := time.Duration(in.WaitSeconds * float64(time.Second))
		if h.limit > 0 && (wait == 0 || wait > h.limit) {
			wait = h.limit
		}
		req, err := h.r.Ask(ctx, h.target(in.To), h.key.Agent, in.Question, wait)
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
		if err := DecodeArgs(args, &in, "to", "text"); err != nil {
			return "", err
		}
		m, err := h.r.Send(ctx, h.target(in.To), h.key.Agent, troupe.KindMessage, in.Text)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("sent to %s (message %d); it reads it at the end of its current turn", in.To, m.ID), nil
	case "delegate":
		var in struct{ To, Task string }
		if err := DecodeArgs(args, &in, "to", "task"); err != nil {
			return "", err
		}
		req, err := h.r.Delegate(ctx, h.target(in.To), h.key.Agent, in.Task)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("delegated to %s as request %s; its result will arrive in your inbox and wake you", in.To, req.ID), nil
	case "reply":
		var in struct{ Text string }
		if err := DecodeArgs(args, &in, "text"); err != nil {
			return "", err
		}
		return "your answer was delivered", h.r.Reply(ctx, h.key, in.Text)
	case "list_agents":
		if err := DecodeArgs(args, &struct{}{}); err != nil {
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
	if slices.ContainsFunc(Catalog, func(t ToolSpec) bool { return t.Name == tool }) {
		if h.r.o.Services == nil {
			return "", fmt.Errorf("tool %q is not available in this daemon", tool)
		}
		return h.r.o.Services.Call(ctx, h.key, tool, args)
	}
	return "", fmt.Errorf("unknown tool %q: the tools are %s", tool, toolNames())
}

func (h toolHost) target(name string) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: h.key.Project, Agent: troupe.AgentID(name)}
}

// DecodeArgs decodes tool arguments strictly (unknown fields refused) and
// names the first missing required field, in sentences an agent can act on.
func DecodeArgs(args json.RawMessage, v any, required ...string) error {
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
