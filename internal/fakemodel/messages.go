package fakemodel

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// parseMessages reads an Anthropic Messages request. The prompt is the last
// text block of the last user message that is not a <system-reminder>
// (Claude Code appends system messages after it, and puts several text
// blocks in one message, e.g. "[Request interrupted by user]").
func parseMessages(req *Request, m map[string]any) {
	for _, t := range arr(m["tools"]) {
		if name := str(obj(t)["name"]); name != "" {
			req.Tools = append(req.Tools, name)
		}
	}
	if f := obj(obj(m["output_config"])["format"]); str(f["type"]) == "json_schema" {
		req.Side, req.schema = SideSchema, f["schema"]
	}
	for _, s := range arr(m["stop_sequences"]) {
		if str(s) == "</block>" {
			req.Side = SideClassifier
		}
	}
	msgs := arr(m["messages"])
	for i := len(msgs) - 1; i >= 0; i-- {
		msg := obj(msgs[i])
		if str(msg["role"]) != "user" {
			continue
		}
		req.Prompt = lastText(msg["content"])
		var results []string
		for _, b := range arr(msg["content"]) {
			if blk := obj(b); str(blk["type"]) == "tool_result" {
				req.AfterTool = true
				results = append(results, blockText(blk["content"]))
			}
		}
		req.ToolResult = strings.Join(results, "\n")
		return
	}
}

// lastText is a string, or the last text of a list of content parts that is
// not a <system-reminder>.
func lastText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var last string
	for _, b := range arr(v) {
		t, ok := obj(b)["text"].(string)
		if ok && !strings.HasPrefix(strings.TrimSpace(t), "<system-reminder>") {
			last = t
		}
	}
	return last
}

// blockText is the text of a string or of a list of text blocks.
func blockText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var parts []string
	for _, b := range arr(v) {
		if t, ok := obj(b)["text"].(string); ok {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

func messagesStop(r Reply) (reason string, seq any) {
	switch {
	case r.StopSequence != "":
		return "stop_sequence", r.StopSequence
	case len(r.Calls) > 0:
		return "tool_use", nil
	}
	return "end_turn", nil
}

func messageID(req Request) string { return fmt.Sprintf("msg_fake_%s_%d", req.run, req.Seq) }
func toolUseID(req Request, i int) string {
	return fmt.Sprintf("toolu_fake_%s_%d_%d", req.run, req.Seq, i)
}

// messagesEvents is the SSE answer: message_start, a text block (its text
// in chunks), one tool_use block per call, message_delta, message_stop.
func messagesEvents(req Request, chunks []string) []event {
	r := req.Reply
	evs := []event{{name: "message_start", data: map[string]any{"type": "message_start", "message": map[string]any{
		"id": messageID(req), "type": "message", "role": "assistant", "model": modelOf(req), "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inputTokens, "output_tokens": 1}}}}}
	idx := 0
	if r.Text != "" || len(r.Calls) == 0 {
		evs = append(evs, event{name: "content_block_start", data: map[string]any{"type": "content_block_start",
			"index": idx, "content_block": map[string]any{"type": "text", "text": ""}}})
		for _, c := range chunks {
			evs = append(evs, event{name: "content_block_delta", delta: true, data: map[string]any{
				"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": c}}})
		}
		evs = append(evs, event{name: "content_block_stop", data: map[string]any{"type": "content_block_stop", "index": idx}})
		idx++
	}
	for i, c := range r.Calls {
		evs = append(evs,
			event{name: "content_block_start", data: map[string]any{"type": "content_block_start", "index": idx,
				"content_block": map[string]any{"type": "tool_use", "id": toolUseID(req, i), "name": c.Name, "input": map[string]any{}}}},
			event{name: "content_block_delta", data: map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(c.Args)}}},
			event{name: "content_block_stop", data: map[string]any{"type": "content_block_stop", "index": idx}})
		idx++
	}
	reason, seq := messagesStop(r)
	return append(evs,
		event{name: "message_delta", data: map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
			"usage": map[string]any{"output_tokens": outputTokens}}},
		event{name: "message_stop", data: map[string]any{"type": "message_stop"}})
}

// messagesObject is the non-streaming answer.
func messagesObject(req Request) any {
	r := req.Reply
	content := []any{}
	if r.Text != "" || len(r.Calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for i, c := range r.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": toolUseID(req, i), "name": c.Name,
			"input": json.RawMessage(c.Args)})
	}
	reason, seq := messagesStop(r)
	return map[string]any{"id": messageID(req), "type": "message", "role": "assistant", "model": modelOf(req),
		"content": content, "stop_reason": reason, "stop_sequence": seq,
		"usage": map[string]any{"input_tokens": inputTokens, "output_tokens": outputTokens}}
}

// newRunID makes the ids of messages and tool calls unique across servers
// and runs: a client that resumes a conversation recorded against an
// earlier server (Claude Code merges assistant blocks by message id) must
// never meet an id again.
func newRunID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
