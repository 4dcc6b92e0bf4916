package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
)

// The Chat Completions wire: what troupe sends and reads. Only the fields
// it uses.

// chatMessage is one message of the conversation, as sent.
type chatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// toolCall is a call the model made.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatChunk is one streamed chunk, or (Message set) a whole answer.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Message *struct {
			Content          string     `json:"content"`
			ReasoningContent string     `json:"reasoning_content"`
			ToolCalls        []toolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Bounds of what one model answer may hold; past them the answer is cut
// (text) or refused (calls), the cut stated.
const (
	maxLine       = 8 << 20  // one SSE line
	maxStepText   = 1 << 20  // the text of one answer
	maxCallArgs   = 1 << 20  // the arguments of one call
	maxCalls      = 64       // tool calls in one answer
	maxErrBody    = 16 << 10 // an error body read
	maxErrMessage = 512      // of which shown
	// maxEmptyChunks bounds the chunks in a row that bring nothing (no
	// text, reasoning or call): each counts as activity, so a server
	// sending them without end would hold the turn past every watchdog.
	// A heartbeat a second passes it after a day.
	maxEmptyChunks = 100000
)

// step is one model answer, streamed.
type step struct {
	text     string
	thinking bool // reasoning was streamed
	calls    []toolCall
	finish   string
	usage    *usage
	cut      bool // the text was cut at maxStepText
}

type usage struct{ prompt, completion int64 }

// stepSink gets what the stream brings as it comes: every chunk (activity),
// text and reasoning deltas.
type stepSink interface {
	chunk()
	output(text string)
	thinking(text string)
}

// httpError is a model server's refusal.
type httpError struct {
	status  int
	message string        // the server's words, redacted and cut
	retry   time.Duration // how long the server asks to wait (0: it did not say)
	reset   time.Time     // when that wait ends; zero when it did not say
}

func (e *httpError) Error() string {
	return fmt.Sprintf("model server answered %d %s: %s", e.status, http.StatusText(e.status), e.message)
}

// retryable says whether the request may be tried again.
func (e *httpError) retryable() bool {
	return e.status == http.StatusTooManyRequests || e.status >= 500
}

// errStream is a stream that broke after the answer began.
type errStream struct{ err error }

func (e *errStream) Error() string { return "model stream broke: " + e.err.Error() }
func (e *errStream) Unwrap() error { return e.err }

// client talks to one model server.
type client struct {
	http    *http.Client
	url     string // …/chat/completions
	key     string // "" when none
	retries int
	backoff func(attempt int) time.Duration

	br *bufio.Reader // reused by each stream (one request at a time: the turn's)
}

// post sends body and reads the answer into sink. A server error or a
// failure before any answer is retried (bounded, backoff); each retry is
// reported to onRetry (activity). A stream that broke mid-answer is not
// retried: its text went out already.
func (c *client) post(ctx context.Context, body []byte, sink stepSink, onRetry func(attempt int, err error)) (step, error) {
	for attempt := 0; ; attempt++ {
		st, err := c.once(ctx, body, sink)
		if err == nil {
			return st, nil
		}
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		var he *httpError
		var se *errStream
		switch {
		case errors.As(err, &se):
			return st, err
		case errors.As(err, &he) && !he.retryable():
			return st, err
		}
		if attempt >= c.retries {
			return st, fmt.Errorf("%w (gave up after %d tries)", err, attempt+1)
		}
		if he != nil && he.status == http.StatusTooManyRequests && he.retry > maxRetryAfter {
			// A usage limit lasting longer than a retry waits: the turn
			// ends on it, and the runtime waits for its reset.
			return st, err
		}
		wait := c.backoff(attempt)
		if he != nil && he.retry > 0 {
			wait = min(max(wait, he.retry), maxRetryAfter)
		}
		onRetry(attempt+1, err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return st, ctx.Err()
		}
	}
}

// maxRetryAfter bounds a server's Retry-After.
const maxRetryAfter = 30 * time.Second

// once is one request.
func (c *client) once(ctx context.Context, body []byte, sink stepSink) (step, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return step{}, fmt.Errorf("make model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return step{}, fmt.Errorf("reach model server: %s", c.redact(err.Error()))
	}
	defer resp.Body.Close()
	sink.chunk()
	if resp.StatusCode != http.StatusOK {
		return step{}, c.refusal(resp)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json": // a server that does not stream
		return c.whole(resp.Body, sink)
	case "text/event-stream", "":
		return c.stream(resp.Body, sink)
	}
	return step{}, &errStream{fmt.Errorf("the server answered %s, not an event stream: is base_url the API's, up to /v1 (like http://127.0.0.1:8080/v1)?", clipText(c.redact(mt), 100))}
}

// refusal reads a non-200 answer: the server's message, with the key
// redacted, and its Retry-After.
func (c *client) refusal(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrBody))
	msg := strings.TrimSpace(string(raw))
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && len(body.Error) > 0 {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body.Error, &e) == nil && e.Message != "" {
			msg = e.Message
		} else if s, err := strconv.Unquote(string(body.Error)); err == nil {
			msg = s
		}
	}
	if msg == "" {
		msg = "(no message)"
	}
	he := &httpError{status: resp.StatusCode, message: clipText(c.redact(msg), maxErrMessage)}
	he.retry = retryAfter(resp.Header, time.Now())
	if he.retry > 0 {
		he.reset = time.Now().Add(he.retry)
	}
	return he
}

// maxServerWait bounds any wait a server asks for (a hostile or broken
// one can say years); the runtime clamps a usage limit's reset too.
const maxServerWait = 24 * time.Hour

// retryAfter is the wait a refusal's headers ask for: Retry-After (seconds
// or an HTTP date), else OpenAI's x-ratelimit-reset-requests or
// x-ratelimit-reset-tokens (a duration such as "6m0s" or "17ms"), the
// longer of the two; 0 when none says, bounded by maxServerWait.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if s := strings.TrimSpace(h.Get("Retry-After")); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
			d = time.Duration(min(n, int64(maxServerWait/time.Second))) * time.Second
		} else if t, err := http.ParseTime(s); err == nil {
			d = t.Sub(now)
		}
	} else {
		for _, k := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
			if v, err := time.ParseDuration(strings.TrimSpace(h.Get(k))); err == nil && v > d {
				d = v
			}
		}
	}
	return min(max(d, 0), maxServerWait)
}

// redact removes the key from a text that may quote it.
func (c *client) redact(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[key redacted]")
}

// whole reads a non-streaming answer.
func (c *client) whole(r io.Reader, sink stepSink) (step, error) {
	var ch chatChunk
	if err := json.NewDecoder(io.LimitReader(r, maxLine)).Decode(&ch); err != nil {
		return step{}, &errStream{fmt.Errorf("read answer: %w", err)}
	}
	sink.chunk()
	var st step
	if ch.Error != nil {
		return st, &httpError{status: http.StatusOK, message: clipText(c.redact(ch.Error.Message), maxErrMessage)}
	}
	if len(ch.Choices) > 0 && ch.Choices[0].Message != nil {
		m := ch.Choices[0].Message
		if m.ReasoningContent != "" {
			st.thinking = true
			sink.thinking(m.ReasoningContent)
		}
		st.text, st.cut = cutText(m.Content, maxStepText)
		if st.text != "" {
			sink.output(st.text)
		}
		if len(m.ToolCalls) > maxCalls {
			return st, &errStream{fmt.Errorf("the answer holds %d tool calls, more than %d", len(m.ToolCalls), maxCalls)}
		}
		st.calls = m.ToolCalls
		if f := ch.Choices[0].FinishReason; f != nil {
			st.finish = *f
		}
	}
	if ch.Usage != nil {
		st.usage = &usage{prompt: ch.Usage.PromptTokens, completion: ch.Usage.CompletionTokens}
	}
	return st, nil
}

// stream reads an SSE answer to its [DONE] (or its end after a finish
// reason).
func (c *client) stream(r io.Reader, sink stepSink) (step, error) {
	if c.br == nil {
		c.br = bufio.NewReaderSize(r, 16<<10)
	} else {
		c.br.Reset(r)
	}
	br := c.br
	defer br.Reset(nil) // let go of the body
	var st step
	var text strings.Builder
	type partial struct {
		id, name string
		args     strings.Builder
	}
	var calls []*partial
	thought := 0 // bytes of reasoning streamed
	empty := 0   // chunks in a row that brought nothing
	progress := func() int {
		n := text.Len() + thought
		for _, p := range calls {
			if p != nil {
				n += len(p.id) + len(p.name) + p.args.Len()
			}
		}
		return n
	}
	finish := func() (step, error) {
		st.text = text.String()
		for i, p := range calls {
			if p == nil {
				return st, &errStream{fmt.Errorf("tool call %d of the answer never began", i)}
			}
			st.calls = append(st.calls, toolCall{ID: p.id, Type: "function", Function: functionCall{Name: p.name, Arguments: p.args.String()}})
		}
		return st, nil
	}
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) && st.finish != "" {
				return finish() // a server that ends without [DONE]
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			s, _ := finish()
			return s, &errStream{err}
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank lines, comments, event: names
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			break
		}
		sink.chunk()
		var ch chatChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			s, _ := finish()
			return s, &errStream{fmt.Errorf("a chunk that is not JSON: %s", clipText(c.redact(string(data)), 200))}
		}
		if ch.Error != nil {
			s, _ := finish()
			return s, &errStream{errors.New(clipText(c.redact(ch.Error.Message), maxErrMessage))}
		}
		if ch.Usage != nil {
			st.usage = &usage{prompt: ch.Usage.PromptTokens, completion: ch.Usage.CompletionTokens}
		}
		before := progress()
		for _, choice := range ch.Choices {
			d := choice.Delta
			if t := d.ReasoningContent + d.Reasoning; t != "" {
				// A model that reasons in a loop streams until its
				// context is full, or forever: stopped at the bound.
				if thought += len(t); thought > maxStepText {
					s, _ := finish()
					return s, &errStream{fmt.Errorf("the model's reasoning passed %d bytes without an answer: stopped reading (a model thinking in a loop? lower its max tokens or its temperature)", maxStepText)}
				}
				st.thinking = true
				sink.thinking(t)
			}
			if d.Content != "" {
				room := maxStepText - text.Len()
				out := d.Content
				if len(out) > room {
					out, st.cut = clip.Head(out, room), true
				}
				if out != "" {
					text.WriteString(out)
					sink.output(out)
				}
				if st.cut {
					// Nothing more of it is kept: the rest is not
					// read (a model repeating itself never ends).
					if st.finish == "" {
						st.finish = "length"
					}
					return finish()
				}
			}
			for _, tc := range d.ToolCalls {
				if tc.Index < 0 || tc.Index >= maxCalls {
					s, _ := finish()
					return s, &errStream{fmt.Errorf("tool call index %d: at most %d calls in one answer", tc.Index, maxCalls)}
				}
				for len(calls) <= tc.Index {
					calls = append(calls, nil)
				}
				p := calls[tc.Index]
				if p == nil {
					p = &partial{}
					calls[tc.Index] = p
				}
				if tc.ID != "" {
					p.id = tc.ID
				}
				if tc.Function.Name != "" {
					p.name += tc.Function.Name
				}
				if p.args.Len()+len(tc.Function.Arguments) > maxCallArgs {
					s, _ := finish()
					return s, &errStream{fmt.Errorf("the arguments of tool call %d pass %d bytes", tc.Index, maxCallArgs)}
				}
				p.args.WriteString(tc.Function.Arguments)
			}
			if choice.FinishReason != nil && *choice.FinishReason != "" {
				st.finish = *choice.FinishReason
			}
		}
		if progress() > before {
			empty = 0
		} else if empty++; empty > maxEmptyChunks {
			s, _ := finish()
			return s, &errStream{fmt.Errorf("the server sent more than %d chunks in a row with nothing in them: stopped reading", maxEmptyChunks)}
		}
	}
	return finish()
}

// readLine reads one line (without its end), at most maxLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > maxLine {
			return nil, fmt.Errorf("a line of the stream passes %d bytes", maxLine)
		}
		if err == nil {
			if buf == nil {
				return bytes.TrimRight(frag, "\r\n"), nil
			}
			buf = append(buf, frag...)
			return bytes.TrimRight(buf, "\r\n"), nil
		}
		buf = append(buf, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				return bytes.TrimRight(buf, "\r\n"), nil
			}
			return nil, err
		}
	}
}

// cutText cuts s to n bytes (valid UTF-8) and says whether it did.
func cutText(s string, n int) (string, bool) {
	t := clip.Head(s, n)
	return t, len(t) < len(s)
}

// clipText is cutText with "…" where it cut.
func clipText(s string, n int) string {
	s, _ = clip.Ellipsis(s, n)
	return s
}
