package fakemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
)

// API is the kind of a model request.
type API string

// The APIs served. Other requests are recorded with API "".
const (
	Messages        API = "anthropic-messages"     // POST …/messages
	CountTokens     API = "anthropic-count-tokens" // POST …/messages/count_tokens
	Responses       API = "openai-responses"       // POST …/responses
	ChatCompletions API = "openai-chat"            // POST …/chat/completions
)

// Request is one recorded HTTP request, with what the server read from it.
type Request struct {
	Seq    int // 1-based, in arrival order; 0 while a Script looks at it
	Method string
	Path   string // without the query
	Query  string // raw query, e.g. beta=true
	Header http.Header
	API    API
	Body   map[string]any // the JSON body; nil when there is none

	Model      string
	Stream     bool
	Prompt     string   // the last user message's text (system reminders skipped)
	AfterTool  bool     // the last user turn carries a tool result
	ToolResult string   // its text
	Tools      []string // names of the tools offered (Codex namespace tools as NAMESPACE__NAME)
	Side       string   // SideSchema, SideClassifier, SideTitle, or "" for an ordinary turn
	SessionID  string   // header x-claude-code-session-id, session-id or x-session-id

	Reply Reply // the reply chosen (model requests only), tool names resolved

	run     string        // the server's run id: ids it hands out are unique across servers
	schema  any           // output_config.format.schema of a SideSchema request
	offered []offeredTool // Responses: how to name a call of each tool
}

// offeredTool is a tool as the Responses API offered it.
type offeredTool struct {
	full      string // the name in Request.Tools
	namespace string // "mcp__troupe" for a namespace tool
	name      string // the name inside the namespace
	custom    bool   // a custom (freeform) tool: the call carries input text
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "fake model closed", http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(),
		API: apiOf(r.Method, r.URL.Path)}
	for _, h := range []string{"X-Claude-Code-Session-Id", "Session-Id", "X-Session-Id"} {
		if v := r.Header.Get(h); v != "" {
			req.SessionID = v
			break
		}
	}
	log := s.log.With("method", r.Method, "path", r.URL.Path)
	if req.API == "" {
		s.record(&req, nil)
		log.Debug("fake model request", "seq", req.Seq)
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
			writeJSON(w, http.StatusOK, modelList())
			return
		}
		if strings.HasPrefix(r.URL.Path, "/npm/") { // OpenCode's plugin look-up: a 404 lets it go on
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{}) // e.g. Claude's HEAD /api/hello
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		s.record(&req, nil)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, req.API, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body is over %d bytes", s.maxBody))
			return
		}
		writeError(w, req.API, http.StatusBadRequest, "read request body: "+err.Error())
		return
	}
	if err := parseBody(&req, body); err != nil {
		s.record(&req, body)
		log.Debug("fake model bad request", "err", err)
		writeError(w, req.API, http.StatusBadRequest, err.Error())
		return
	}
	if req.API == CountTokens {
		s.record(&req, body)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": inputTokens})
		return
	}
	req.Reply = resolve(req, s.choose(req))
	s.record(&req, body)
	log.Debug("fake model request", "seq", req.Seq, "api", req.API, "prompt", clipLog(req.Prompt),
		"after_tool", req.AfterTool, "reply", clipLog(req.Reply.Text), "calls", len(req.Reply.Calls),
		"status", req.Reply.Status, "drop", req.Reply.Drop)
	s.answer(r.Context(), w, req)
}

func apiOf(method, path string) API {
	if method != http.MethodPost {
		return ""
	}
	switch {
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return CountTokens
	case strings.HasSuffix(path, "/messages"):
		return Messages
	case strings.HasSuffix(path, "/responses"):
		return Responses
	case strings.HasSuffix(path, "/chat/completions"):
		return ChatCompletions
	}
	return ""
}

// parseBody decodes the JSON body into req.Body and reads the fields the
// reply depends on.
func parseBody(req *Request, body []byte) error {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("parse request body: %w", err)
	}
	if m == nil {
		return errors.New("parse request body: want a JSON object")
	}
	req.Body = m
	req.Model, _ = m["model"].(string)
	req.Stream, _ = m["stream"].(bool)
	switch req.API {
	case Messages, CountTokens:
		parseMessages(req, m)
	case Responses:
		parseResponses(req, m)
	case ChatCompletions:
		parseChat(req, m)
	}
	return nil
}

// wait sleeps for d, or until the request or the server ends (false).
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

// hold waits for ch to close (a nil ch does not wait).
func (s *Server) hold(ctx context.Context, ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-s.done:
	}
	return false
}

// event is one SSE event of an answer. delta marks a chunk of the text: the
// pace applies between deltas, and a drop comes after the first.
type event struct {
	name  string // SSE event name; "" for none (Chat Completions)
	data  any    // marshalled to JSON; a string is sent as is
	delta bool
}

// answer writes the reply in the request's API, streaming or not.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, req Request) {
	rep := req.Reply
	if !s.wait(ctx, rep.Delay) || !s.hold(ctx, rep.Hold) {
		return
	}
	if rep.Limit != nil {
		if left, ok := s.limit(*rep.Limit); ok {
			writeLimit(w, req.API, left, rep.Limit.Quiet)
			return
		}
	}
	if rep.Status != 0 {
		writeError(w, req.API, rep.Status, fmt.Sprintf("fake error %d", rep.Status))
		return
	}
	chunks := rep.Slow.chunks(rep.Text)
	if !req.Stream {
		if rep.Drop {
			panic(http.ErrAbortHandler) // closes the connection with no response
		}
		if !s.wait(ctx, rep.Silence+rep.Slow.Total) {
			return
		}
		writeJSON(w, http.StatusOK, whole(req))
		return
	}
	var evs []event
	switch req.API {
	case Messages:
		evs = messagesEvents(req, chunks)
	case Responses:
		evs = responsesEvents(req, chunks)
	case ChatCompletions:
		evs = chatEvents(req, chunks)
	}
	s.stream(ctx, w, rep, evs)
}

// stream writes events as SSE, flushing each: Silence after the first event,
// the pace between text deltas, and a drop after the first delta.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, rep Reply, evs []event) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	deltas := 0
	for i, ev := range evs {
		if ev.delta {
			if deltas > 0 && !s.wait(ctx, rep.Slow.Every) {
				return
			}
			deltas++
		}
		if err := writeEvent(w, ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if rep.Drop && (ev.delta || i == len(evs)-1) {
			panic(http.ErrAbortHandler) // the chunked body never ends: the client sees an unexpected EOF
		}
		if i == 0 && !s.wait(ctx, rep.Silence) {
			return
		}
	}
}

func writeEvent(w io.Writer, ev event) error {
	data, ok := ev.data.(string)
	if !ok {
		b, err := json.Marshal(ev.data)
		if err != nil {
			return fmt.Errorf("marshal event %s: %w", ev.name, err)
		}
		data = string(b)
	}
	var err error
	if ev.name != "" {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data)
	} else {
		_, err = fmt.Fprintf(w, "data: %s\n\n", data)
	}
	return err
}

// whole is the non-streaming answer of a request.
func whole(req Request) any {
	switch req.API {
	case Responses:
		return responsesObject(req, true)
	case ChatCompletions:
		return chatObject(req)
	}
	return messagesObject(req)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do about it
}

// writeError answers status with the error body of the request's provider.
func writeError(w http.ResponseWriter, api API, status int, msg string) {
	if api == Responses || api == ChatCompletions {
		typ := "invalid_request_error"
		if status >= 500 {
			typ = "server_error"
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"message": msg, "type": typ, "param": nil, "code": nil}})
		return
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{
		"type": anthropicErrorType(status), "message": msg}})
}

func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

func modelList() any {
	return map[string]any{"object": "list", "has_more": false, "first_id": FakeModel, "last_id": FakeModel,
		"data": []any{map[string]any{"id": FakeModel, "object": "model", "type": "model",
			"display_name": "Fake model", "created": 1767225600, "created_at": "2026-01-01T00:00:00Z", "owned_by": "troupe"}}}
}

// FakeModel names the model when a request names none.
const FakeModel = "fake-model"

// Usage reported in every answer: constants, but plausible.
const (
	inputTokens  = 120
	outputTokens = 24
)

func modelOf(req Request) string {
	if req.Model != "" {
		return req.Model
	}
	return FakeModel
}

func clipLog(s string) string {
	s, _ = clip.Ellipsis(s, 80)
	return s
}

// JSON navigation over decoded bodies: wrong shapes read as zero values.

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func arr(v any) []any          { a, _ := v.([]any); return a }
func str(v any) string         { s, _ := v.(string); return s }
