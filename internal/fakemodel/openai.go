package fakemodel

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The OpenAI APIs: Responses (Codex; the shapes follow
// shared/fixtures/codex/fake_sse_responses_*.txt, which Codex 0.171 accepted)
// and Chat Completions (OpenCode and OpenAI-compatible clients; shapes from
// shared/fixtures/opencode/fake_sse_chat_*.txt).

const createdAt = 1767225600 // 2026-01-01: constant, so answers are reproducible

// parseResponses reads a Responses request. Codex offers MCP tools as a
// namespace tool ({"type":"namespace","name":"mcp__troupe","tools":[…]}): its
// tools are named NAMESPACE__NAME here, and a call carries the namespace.
// A function_call_output or custom_tool_call_output after the last user
// message is a tool result.
func parseResponses(req *Request, m map[string]any) {
	for _, t := range arr(m["tools"]) {
		tl := obj(t)
		name := str(tl["name"])
		switch str(tl["type"]) {
		case "namespace":
			for _, in := range arr(tl["tools"]) {
				if n := str(obj(in)["name"]); n != "" && name != "" {
					req.offered = append(req.offered, offeredTool{full: name + "__" + n, namespace: name, name: n})
				}
			}
		case "custom":
			req.offered = append(req.offered, offeredTool{full: name, name: name, custom: true})
		default:
			if name != "" {
				req.offered = append(req.offered, offeredTool{full: name, name: name})
			}
		}
	}
	for _, o := range req.offered {
		req.Tools = append(req.Tools, o.full)
	}
	if s, ok := m["input"].(string); ok {
		req.Prompt = s
		return
	}
	items := arr(m["input"])
	for i := len(items) - 1; i >= 0; i-- {
		it := obj(items[i])
		switch str(it["type"]) {
		case "function_call_output", "custom_tool_call_output":
			req.AfterTool, req.ToolResult = true, blockText(it["output"])
			return
		case "message", "":
			if str(it["role"]) == "user" {
				req.Prompt = lastText(it["content"])
				return
			}
		}
	}
}

// parseChat reads a Chat Completions request: tool messages at the end are
// a tool result; a system message with "title generator" marks OpenCode's
// title request.
func parseChat(req *Request, m map[string]any) {
	for _, t := range arr(m["tools"]) {
		if n := str(obj(obj(t)["function"])["name"]); n != "" {
			req.Tools = append(req.Tools, n)
		}
	}
	msgs := arr(m["messages"])
	var results []string
	for i := len(msgs) - 1; i >= 0 && str(obj(msgs[i])["role"]) == "tool"; i-- {
		results = append([]string{blockText(obj(msgs[i])["content"])}, results...)
	}
	if len(results) > 0 {
		req.AfterTool, req.ToolResult = true, strings.Join(results, "\n")
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		msg := obj(msgs[i])
		switch str(msg["role"]) {
		case "system":
			if strings.Contains(blockText(msg["content"]), "title generator") {
				req.Side = SideTitle
			}
		case "user":
			if req.Prompt == "" && !req.AfterTool {
				req.Prompt = lastText(msg["content"])
			}
		}
	}
}

func responseID(req Request) string { return fmt.Sprintf("resp_fake_%s_%d", req.run, req.Seq) }
func callID(req Request, i int) string {
	return fmt.Sprintf("call_fake_%s_%d_%d", req.run, req.Seq, i)
}

// responsesItems are the output items of a Responses answer, complete, or as
// output_item.added announces them (in progress, text and arguments empty).
func responsesItems(req Request, done bool) []map[string]any {
	r := req.Reply
	status := "in_progress"
	if done {
		status = "completed"
	}
	var items []map[string]any
	if r.Text != "" || len(r.Calls) == 0 {
		content := []any{}
		if done {
			content = append(content, map[string]any{"type": "output_text", "text": r.Text, "annotations": []any{}})
		}
		items = append(items, map[string]any{"type": "message", "id": messageID(req), "status": status,
			"role": "assistant", "content": content})
	}
	for i, c := range r.Calls {
		o := offeredTool{full: c.Name, name: c.Name}
		for _, t := range req.offered {
			if t.full == c.Name {
				o = t
			}
		}
		it := map[string]any{"id": fmt.Sprintf("fc_fake_%s_%d_%d", req.run, req.Seq, i), "call_id": callID(req, i),
			"name": o.name, "status": status}
		if o.namespace != "" {
			it["namespace"] = o.namespace
		}
		if o.custom {
			it["type"], it["input"] = "custom_tool_call", ""
			if done {
				it["input"] = customInput(c.Args)
			}
		} else {
			it["type"], it["arguments"] = "function_call", ""
			if done {
				it["arguments"] = string(c.Args)
			}
		}
		items = append(items, it)
	}
	return items
}

// customInput is the input text of a custom tool call (Codex's freeform
// apply_patch): the "input" string of the arguments, else the arguments.
func customInput(args json.RawMessage) string {
	var a struct{ Input *string }
	if json.Unmarshal(args, &a) == nil && a.Input != nil {
		return *a.Input
	}
	return string(args)
}

func responsesUsage() map[string]any {
	return map[string]any{"input_tokens": inputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": inputTokens + outputTokens}
}

// responsesObject is the response object: in progress (no output yet) or
// completed, which is also the non-streaming answer.
func responsesObject(req Request, done bool) map[string]any {
	o := map[string]any{"id": responseID(req), "object": "response", "created_at": createdAt,
		"model": modelOf(req), "status": "in_progress", "output": []any{}}
	if done {
		o["status"], o["output"], o["usage"] = "completed", responsesItems(req, true), responsesUsage()
	}
	return o
}

// responsesEvents is the SSE answer: response.created, response.in_progress,
// per item output_item.added … output_item.done (a message's text as
// output_text deltas, a call's arguments as one delta), response.completed.
// Every event carries its sequence_number.
func responsesEvents(req Request, chunks []string) []event {
	ev := func(typ string, kv ...any) event {
		d := map[string]any{"type": typ}
		for i := 0; i+1 < len(kv); i += 2 {
			d[kv[i].(string)] = kv[i+1]
		}
		return event{name: typ, data: d}
	}
	evs := []event{ev("response.created", "response", responsesObject(req, false)),
		ev("response.in_progress", "response", responsesObject(req, false))}
	added, done := responsesItems(req, false), responsesItems(req, true)
	for i, it := range done {
		id := it["id"]
		evs = append(evs, ev("response.output_item.added", "output_index", i, "item", added[i]))
		switch it["type"] {
		case "message":
			text := req.Reply.Text
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			evs = append(evs, ev("response.content_part.added", "item_id", id, "output_index", i, "content_index", 0, "part", part))
			for _, c := range chunks {
				d := ev("response.output_text.delta", "item_id", id, "output_index", i, "content_index", 0, "delta", c, "logprobs", []any{})
				d.delta = true
				evs = append(evs, d)
			}
			evs = append(evs,
				ev("response.output_text.done", "item_id", id, "output_index", i, "content_index", 0, "text", text, "logprobs", []any{}),
				ev("response.content_part.done", "item_id", id, "output_index", i, "content_index", 0,
					"part", map[string]any{"type": "output_text", "text": text, "annotations": []any{}}))
		case "function_call":
			args := it["arguments"]
			evs = append(evs,
				ev("response.function_call_arguments.delta", "item_id", id, "output_index", i, "delta", args),
				ev("response.function_call_arguments.done", "item_id", id, "output_index", i, "arguments", args))
		case "custom_tool_call":
			in := it["input"]
			evs = append(evs,
				ev("response.custom_tool_call_input.delta", "item_id", id, "output_index", i, "delta", in),
				ev("response.custom_tool_call_input.done", "item_id", id, "output_index", i, "input", in))
		}
		evs = append(evs, ev("response.output_item.done", "output_index", i, "item", it))
	}
	evs = append(evs, ev("response.completed", "response", responsesObject(req, true)))
	for i := range evs {
		evs[i].data.(map[string]any)["sequence_number"] = i
	}
	return evs
}

func chatID(req Request) string { return fmt.Sprintf("chatcmpl-fake-%s-%d", req.run, req.Seq) }

func chatFinish(r Reply) string {
	if len(r.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func chatUsage() map[string]any {
	return map[string]any{"prompt_tokens": inputTokens, "completion_tokens": outputTokens,
		"total_tokens": inputTokens + outputTokens}
}

// chatEvents is the SSE answer: a role chunk, content chunks, per tool call
// a chunk with its id and name and one with its arguments, the finish chunk,
// a usage chunk, then [DONE].
func chatEvents(req Request, chunks []string) []event {
	r := req.Reply
	chunk := func(delta map[string]any, finish any) event {
		return event{data: map[string]any{"id": chatID(req), "object": "chat.completion.chunk", "created": createdAt,
			"model": modelOf(req), "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}}
	}
	evs := []event{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	if r.Text != "" {
		for _, c := range chunks {
			e := chunk(map[string]any{"content": c}, nil)
			e.delta = true
			evs = append(evs, e)
		}
	}
	for i, c := range r.Calls {
		evs = append(evs,
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": callID(req, i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": string(c.Args)}}}}, nil))
	}
	return append(evs, chunk(map[string]any{}, chatFinish(r)),
		event{data: map[string]any{"id": chatID(req), "object": "chat.completion.chunk", "created": createdAt,
			"model": modelOf(req), "choices": []any{}, "usage": chatUsage()}},
		event{data: "[DONE]"})
}

// chatObject is the non-streaming answer.
func chatObject(req Request) any {
	r := req.Reply
	msg := map[string]any{"role": "assistant", "content": r.Text}
	if len(r.Calls) > 0 {
		var calls []any
		for i, c := range r.Calls {
			calls = append(calls, map[string]any{"id": callID(req, i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(c.Args)}})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{"id": chatID(req), "object": "chat.completion", "created": createdAt, "model": modelOf(req),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": chatFinish(r)}},
		"usage":   chatUsage()}
}
