package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/permission"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/tool"
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

// Specs lists every tool of the catalogue: the runtime's own and those of
// Options.Tools.
func (r *Runtime) Specs() []tool.Spec { return r.tools.Specs() }

type toolHost struct {
	r     *Runtime
	key   troupe.RuntimeKey
	limit time.Duration // 0: none
}

// Specs implements engine.Tools.
func (h toolHost) Specs() []tool.Spec { return h.r.tools.Specs() }

// Call implements engine.Tools: the call counts as the agent's activity
// while it runs (an agent waiting on a teammate is not silent).
func (h toolHost) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if a := h.r.actor(h.key); a != nil {
		defer a.toolCall()()
	}
	spec, dir, ok := h.r.o.Teams.Agent(h.key)
	if !ok {
		return "", fmt.Errorf("%s is no longer an agent of a registered project: its tools are gone", h.key.Agent)
	}
	work, err := h.r.workspace(ctx, h.key, spec, dir)
	if err != nil {
		return "", err
	}
	c := tool.Caller{Key: h.key, Dir: dir, Workdir: work, Limit: h.limit}
	if spec.Remote() {
		c.Runner = "a runner" // runs nothing here, so no sandbox here
		if spec.Runner != "" {
			c.Runner = string(spec.Runner)
		}
	} else if c.Sandbox, err = h.r.sandbox(ctx, h.key, spec, dir, work); err != nil {
		return "", err
	}
	if work == dir {
		c.Workdir = ""
	}
	if err := h.gate(ctx, name, args); err != nil {
		return "", err
	}
	return h.r.tools.Call(ctx, c, name, args)
}

// gate is the permission gate of troupe's own tools (C15): a tool that
// runs a command or changes a file goes through the session's approver,
// the same decision as the engine's own tools (permission.Decide, then the
// person). There is no allowance by origin: a call over MCP and one from
// an engine's own loop pass the same gate.
func (h toolHost) gate(ctx context.Context, name string, args json.RawMessage) error {
	t, ok := h.r.tools.Lookup(name)
	if !ok || t.Class == permission.Talk || t.Class == permission.Read {
		return nil // an unknown name is the catalogue's error
	}
	a := h.r.actor(h.key)
	var ap *approver
	var turn troupe.TurnID
	if a != nil {
		a.mu.Lock()
		ap = a.appr
		if a.turn != nil {
			turn = a.turn.id
		}
		a.mu.Unlock()
	}
	if ap == nil {
		return fmt.Errorf("%s needs a decision and %s has no session to ask it in: troupe denied it", name, h.key.Agent)
	}
	title := "wants to use " + name
	if t.Title != nil {
		title = t.Title(args)
	}
	d, err := ap.Approve(ctx, engine.Permission{Turn: turn, Tool: name, Class: t.Class, Input: args, Title: title})
	if err != nil {
		return fmt.Errorf("%s was not allowed: %w", name, err)
	}
	if !d.Allow {
		why := d.Reason
		if why == "" {
			why = "denied"
		}
		return fmt.Errorf("%s was not allowed: %s", name, why)
	}
	return nil
}

// ownTools are the tools the runtime serves: asks, replies, messages,
// delegations and the team list.
func (r *Runtime) ownTools() []tool.Tool {
	return []tool.Tool{
		{Spec: tool.Spec{Name: "ask_agent", Description: "Ask another agent of your team a question and wait for its answer. The answer is the final output of the turn in which it handles your question (or what it passes to reply). While it works, you wait; if it stays silent for its whole turn_timeout you get a 'no reply' error. If you give wait_seconds and the answer takes longer, you get a request id at once and the answer arrives later in your inbox. Asking an agent that is itself waiting on you (directly or through others) is refused at once: nobody could answer.",
			Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name, as list_agents shows it"},"question":{"type":"string","description":"what you want to know; say what form of answer you need"},"wait_seconds":{"type":"number","minimum":0,"description":"give up waiting after this many seconds and get the answer in your inbox instead (0 or absent: wait for it)"}},"required":["to","question"],"additionalProperties":false}`)},
			Handle: r.askTool, Class: permission.Talk},
		{Spec: tool.Spec{Name: "reply", Description: "Answer the question you were asked in this turn (an ask_agent from a teammate). Optional: by default your final message of the turn is the answer.",
			Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"your answer"}},"required":["text"],"additionalProperties":false}`)},
			Handle: r.replyTool, Class: permission.Talk},
		{Spec: tool.Spec{Name: "send_message", Description: "Send a message to another agent of your team without waiting. It is delivered into its inbox and read at the start of its next turn.",
			Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name"},"text":{"type":"string","description":"the message"}},"required":["to","text"],"additionalProperties":false}`)},
			Handle: r.sendTool, Class: permission.Talk},
		{Spec: tool.Spec{Name: "delegate", Description: "Give a task to another agent and carry on. When it finishes, its result arrives in your inbox and wakes you. " +
			"Name one of the project's checks in verify to have troupe run it on the agent's workspace when its turn ends: a failure goes back to the agent with the check's output while tries are left, " +
			"and the result you get starts with troupe's verdict (passed, or failed with the output), never the agent's claim alone.",
			Schema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name"},"task":{"type":"string","description":"what to do, and what result to report"},` +
				`"verify":{"type":"string","description":"a check of the project ([checks] in its team file, e.g. test) that judges the work"},` +
				`"tries":{"type":"integer","minimum":1,"maximum":5,"description":"with verify: how many of the agent's turns the check may judge (default 2; 1: check once, no retry)"}},"required":["to","task"],"additionalProperties":false}`)},
			Handle: r.delegateTool, Class: permission.Talk},
		{Spec: tool.Spec{Name: "list_agents", Description: "List the agents of your team with their engine and state (idle, busy, waiting, stopped, failed, blocked).",
			Schema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
			Handle: r.listTool, Class: permission.Talk},
	}
}

// target is the agent named name in c's project.
func target(c tool.Caller, name string) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: c.Key.Project, Agent: troupe.AgentID(name)}
}

func (r *Runtime) askTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		To          string  `json:"to"`
		Question    string  `json:"question"`
		WaitSeconds float64 `json:"wait_seconds"`
	}
	if err := tool.DecodeArgs(args, &in, "to", "question"); err != nil {
		return "", err
	}
	if in.WaitSeconds < 0 {
		return "", fmt.Errorf("bad argument wait_seconds: %v is negative: give 0 to wait for the answer", in.WaitSeconds)
	}
	wait := time.Duration(in.WaitSeconds * float64(time.Second))
	if c.Limit > 0 && (wait == 0 || wait > c.Limit) {
		wait = c.Limit
	}
	// The asking turn remembers the ask: if it ends while the ask still
	// waits (its client gave up on the call), the ask is detached.
	req, err := r.ask(ctx, target(c, in.To), c.Key.Agent, in.Question, wait, func(id troupe.RequestID) {
		if a := r.actor(c.Key); a != nil {
			a.noteAsk(id)
		}
	})
	if err != nil {
		return "", err
	}
	switch req.State {
	case troupe.ReqAnswered:
		return req.Answer, nil
	case troupe.ReqPending:
		if req.Unreachable != "" {
			return fmt.Sprintf("%s is %s: your question (request %s) stays in its inbox and runs when its runner is back; the answer will arrive in your inbox as a reply message. Carry on meanwhile, or ask another agent.",
				in.To, req.Unreachable, req.ID), nil
		}
		if !req.LimitedUntil.IsZero() {
			return fmt.Sprintf("%s is limited until %s (its engine's usage limit): your question (request %s) stays in its inbox and runs then; the answer will arrive in your inbox as a reply message. Carry on meanwhile, or ask another agent.",
				in.To, req.LimitedUntil.UTC().Format("15:04:05 UTC"), req.ID), nil
		}
		return fmt.Sprintf("%s has not answered yet (request %s). The answer will arrive in your inbox as a reply message; carry on meanwhile.", in.To, req.ID), nil
	}
	return "", errors.New(req.Error)
}

func (r *Runtime) sendTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct{ To, Text string }
	if err := tool.DecodeArgs(args, &in, "to", "text"); err != nil {
		return "", err
	}
	m, err := r.Send(ctx, target(c, in.To), c.Key.Agent, troupe.KindMessage, in.Text)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sent to %s (message %d); it reads it at the end of its current turn", in.To, m.ID), nil
}

func (r *Runtime) delegateTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct {
		To, Task string
		Verify   troupe.CheckName `json:"verify"`
		Tries    int              `json:"tries"`
	}
	if err := tool.DecodeArgs(args, &in, "to", "task"); err != nil {
		return "", err
	}
	req, err := r.Delegate(ctx, target(c, in.To), c.Key.Agent, in.Task, in.Verify, in.Tries)
	if err != nil {
		return "", err
	}
	if req.Verify != "" {
		return fmt.Sprintf("delegated to %s as request %s, verified by check %s (%d tries); its result, with troupe's verdict, will arrive in your inbox and wake you",
			in.To, req.ID, req.Verify, req.Tries), nil
	}
	return fmt.Sprintf("delegated to %s as request %s; its result will arrive in your inbox and wake you", in.To, req.ID), nil
}

func (r *Runtime) replyTool(ctx context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	var in struct{ Text string }
	if err := tool.DecodeArgs(args, &in, "text"); err != nil {
		return "", err
	}
	checked, err := r.reply(ctx, c.Key, in.Text)
	switch {
	case err != nil:
		return "", err
	case checked != "":
		return fmt.Sprintf("your answer is kept: when this turn ends troupe runs check %s on your workspace, and your answer goes back with its verdict", checked), nil
	}
	return "your answer was delivered", nil
}

func (r *Runtime) listTool(_ context.Context, c tool.Caller, args json.RawMessage) (string, error) {
	if err := tool.DecodeArgs(args, &struct{}{}); err != nil {
		return "", err
	}
	type row struct {
		Name   troupe.AgentID    `json:"name"`
		Engine troupe.Engine     `json:"engine"`
		State  troupe.AgentState `json:"state"`
		You    bool              `json:"you,omitempty"`
	}
	var rows []row
	for _, a := range r.o.Teams.Agents(c.Key.Project) {
		st, _ := r.AgentState(troupe.RuntimeKey{Project: c.Key.Project, Agent: a.Name})
		rows = append(rows, row{a.Name, a.Engine, st, a.Name == c.Key.Agent})
	}
	b, _ := json.Marshal(rows)
	return string(b), nil
}

// Reply answers, with text, the ask that k's current turn is handling.
// The answer to a verified delegation is kept for troupe's check at the
// turn's end instead (verify.go).
func (r *Runtime) Reply(ctx context.Context, k troupe.RuntimeKey, text string) error {
	_, err := r.reply(ctx, k, text)
	return err
}

// reply is Reply; checked names the check a verified delegation's answer
// waits for ("" when the answer went out).
func (r *Runtime) reply(ctx context.Context, k troupe.RuntimeKey, text string) (checked troupe.CheckName, err error) {
	if err := checkSize("text", text); err != nil {
		return "", fmt.Errorf("reply: %w", err)
	}
	a := r.actor(k)
	var t *turn
	if a != nil {
		t = a.currentTurn()
	}
	if t != nil {
		for _, m := range t.msgs {
			if m.Kind != troupe.KindAsk && m.Kind != troupe.KindDelegate {
				continue
			}
			if m.Kind == troupe.KindDelegate {
				req, err := r.o.Store.Request(ctx, k.Project, m.Request)
				if err != nil {
					return "", fmt.Errorf("reply: %w", err)
				}
				if req.Verify != "" {
					a.mu.Lock()
					if t.replies == nil {
						t.replies = map[troupe.RequestID]string{}
					}
					t.replies[m.Request] = text
					a.mu.Unlock()
					return req.Verify, nil
				}
			}
			r.finish(ctx, m.Request, troupe.ReqAnswered, text, "")
			return "", nil
		}
	}
	return "", errors.New("there is no question to answer in this turn: reply answers an ask_agent question you were given; to write to an agent, use send_message")
}

// workspace is the folder agent k works in (Options.Workspace).
// sandbox is agent k's sandbox (Options.Sandbox): nil when off.
func (r *Runtime) sandbox(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir, work string) (*sandbox.Policy, error) {
	if r.o.Sandbox == nil {
		return nil, nil
	}
	p, err := r.o.Sandbox(ctx, k, spec, dir, work)
	if err != nil {
		return nil, fmt.Errorf("make sandbox of %s: %w", k.Agent, err)
	}
	if !p.On {
		return nil, nil
	}
	return &p, nil
}

func (r *Runtime) workspace(ctx context.Context, k troupe.RuntimeKey, spec troupe.AgentSpec, dir string) (string, error) {
	if r.o.Workspace == nil {
		return dir, nil
	}
	work, err := r.o.Workspace(ctx, k, spec, dir)
	if err != nil {
		return "", fmt.Errorf("make workspace of %s: %w", k.Agent, err)
	}
	return work, nil
}
