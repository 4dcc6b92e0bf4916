package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/troupe"
)

var _ engine.Session = (*Session)(nil)

// eventBuffer is the capacity of a session's Events channel.
const eventBuffer = 64

// bytesPerToken is how many bytes of JSON the context budget counts as one
// token until the server says (usage.prompt_tokens of an answer): a
// cautious guess (English text runs near 4, code near 3), so the budget
// errs on the side of dropping a turn rather than being refused.
const bytesPerToken = 3

// storeTimeout bounds one write of the conversation.
const storeTimeout = 30 * time.Second

type toolKind int

const (
	kindTroupe toolKind = iota + 1
	kindWorkspace
)

// Session is one agent's conversation with its model; troupe runs the
// loop. It is safe for concurrent use; see the package doc for the
// goroutines it owns.
type Session struct {
	// The events, activity, Err, turn gate and Close. Its Mu guards
	// interrupted and deathErr.
	*engine.SessionCore

	log      *slog.Logger
	key      troupe.RuntimeKey
	opts     options
	tools    engine.Tools
	approver engine.Approver
	store    Store
	conv     string
	ws       *workspace
	env      []string
	backstop string          // coreutils timeout, "" when none (command.go)
	sandbox  *sandbox.Policy // the agent's, for its commands; nil: unsandboxed
	client   *client

	// Fixed at Start.
	offered  map[string]toolKind
	names    []string // offered tools, in order
	toolDefs []byte   // the tools array as sent; nil when none
	sysBytes []byte   // the system message; nil when none
	prefix   []byte   // the model's name, JSON

	wg   sync.WaitGroup // the turn's goroutine
	dead chan struct{}  // closed by die
	once sync.Once

	// limit is the usage limit the running turn ended on (HTTP 429 past
	// the retries); used by the turn's goroutine only.
	limit *engine.Limit

	interrupted bool  // guarded by Mu: Interrupt was called in the running turn
	deathErr    error // guarded by Mu: why the session died

	// Owned by the running turn's goroutine (one at a time: Send starts
	// a turn only once the last one ended, which it does after its last
	// touch of these).
	hist     []histEntry
	pending  []troupe.ConversationEntry // added to hist, not stored yet
	bodyBuf  []byte                     // the last request's body, reused once it was sent
	bpt      float64                    // bytes a token, as the server counted; 0: bytesPerToken
	nextTurn int64
}

// histEntry is one message of the conversation, as stored and sent.
type histEntry struct {
	turn int64
	data []byte // the chatMessage, JSON
}

// ID is the conversation's id.
func (s *Session) ID() string { return s.conv }

// run ends the session: when Close cancels its context or a turn dies, it
// waits for the turn, closes the workspace and closes Events.
func (s *Session) run() {
	select {
	case <-s.Context().Done():
	case <-s.dead:
	}
	s.Finish(func() error {
		return s.deathErr // Mu is held by Finish
	}, func() {
		s.wg.Wait()
		s.ws.close()
	})
}

// die ends the session on its own with err (the conversation could not be
// kept): no turn end; Events closes and Err says why.
func (s *Session) die(err error) {
	s.Mu.Lock()
	if s.deathErr == nil {
		s.deathErr = err
	}
	s.Mu.Unlock()
	s.log.Error("openai session ends", "err", err)
	s.once.Do(func() { close(s.dead) })
}

// Send starts a turn: the rendered messages as one user message, then the
// loop (model request, tool calls, again) until the model answers without
// a tool call, max_steps, an error, or Interrupt. Its events follow on
// Events, ending with one EventTurnEnd.
func (s *Session) Send(ctx context.Context, in engine.Input) error {
	tctx, err := s.BeginTurn(ctx, in, func() error {
		select {
		case <-s.dead:
			return errors.New("session ended")
		default:
		}
		s.interrupted = false
		s.wg.Add(1) // under Mu, before Close can be marked: run's Wait comes after
		return nil
	})
	if err != nil {
		return err
	}
	go s.runTurn(tctx, in)
	return nil
}

// Interrupt cancels the running turn: its HTTP stream, its running command
// or tool call, its wait for the person. The turn then ends with an
// EventTurnEnd whose Error is "interrupted". Without a turn it does
// nothing.
func (s *Session) Interrupt(context.Context) error {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if turn, _ := s.TurnLocked(); turn != "" {
		s.interrupted = true
		s.CancelTurnLocked()
	}
	return nil
}

// Close cancels the running turn (its stream, its command, stopped by
// escalation) and waits for it; Events is then closed. It may be called
// more than once, concurrently.
func (s *Session) Close(ctx context.Context) error {
	return s.Shutdown(ctx, "close openai session", func(context.Context) {})
}

// runTurn is the turn's goroutine.
func (s *Session) runTurn(ctx context.Context, in engine.Input) {
	defer s.wg.Done()
	s.limit = nil
	final, why, fatal := s.turn(ctx, in)
	if fatal != nil {
		s.die(fatal)
		return
	}
	s.Mu.Lock()
	closing := s.ClosingLocked()
	if s.interrupted {
		why = "interrupted"
	}
	s.EndTurnLocked()
	s.Mu.Unlock()
	if closing {
		return
	}
	ev := engine.Event{Kind: engine.EventTurnEnd, Turn: in.Turn, Text: final, Error: why}
	if why != "interrupted" {
		ev.Limit = s.limit
	}
	s.Emit(ev)
}

// sink is a step's stepSink: it bumps the activity token on every chunk
// (C3) and emits text as output.
type sink struct {
	s    *Session
	turn troupe.TurnID
}

func (k sink) chunk() { k.s.Bump() }
func (k sink) output(t string) {
	k.s.Emit(engine.Event{Kind: engine.EventOutput, Turn: k.turn, Text: t})
}
func (k sink) thinking(t string) {
	k.s.Emit(engine.Event{Kind: engine.EventThinking, Turn: k.turn, Text: t})
}

// turn runs one turn. It returns the turn's final output and why it failed
// ("" when it did not), or a fatal error: the conversation could not be
// stored, and the session dies.
func (s *Session) turn(ctx context.Context, in engine.Input) (final, why string, fatal error) {
	turnNo := s.nextTurn
	s.nextTurn++
	defer func() { // what the turn added is stored however it ends
		if err := s.flush(ctx); err != nil && fatal == nil {
			fatal = err
		}
	}()
	if err := s.add(turnNo, chatMessage{Role: "user", Content: engine.Render(in)}); err != nil {
		return "", "", err
	}
	var total engine.Usage
	noted := false
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			return final, "interrupted", nil
		}
		if over, err := s.fit(ctx, in.Turn, turnNo); err != nil {
			return final, "", err
		} else if over && !noted {
			noted = true
			s.Emit(engine.Event{Kind: engine.EventNotice, Turn: in.Turn, Text: fmt.Sprintf(
				"this turn alone is about %d tokens, over max_context_tokens = %d: the model server may refuse it",
				s.tokens(), s.opts.maxContextTokens)})
		}
		body := s.body()
		st, err := s.client.post(ctx, body, sink{s, in.Turn}, func(attempt int, err error) {
			s.Bump() // a retry is activity
			s.log.Warn("model request failed: trying again", "attempt", attempt, "err", err)
		})
		if st.usage != nil {
			s.calibrate(len(body), st.usage.prompt)
			total.InputTokens += st.usage.prompt
			total.OutputTokens += st.usage.completion
			u := total
			s.Emit(engine.Event{Kind: engine.EventUsage, Turn: in.Turn, Usage: &u})
		}
		if err != nil {
			if st.text != "" { // what the model said before the break stays said
				if ferr := s.add(turnNo, chatMessage{Role: "assistant", Content: st.text}); ferr != nil {
					return final, "", ferr
				}
				final = st.text
			}
			if ctx.Err() != nil {
				return final, "interrupted", nil
			}
			var he *httpError
			if errors.As(err, &he) && he.status == http.StatusTooManyRequests {
				s.limit = &engine.Limit{Until: engine.LimitUntil(he.reset, time.Now())}
			}
			return final, err.Error(), nil
		}
		calls := st.calls
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = fmt.Sprintf("call_%d_%d_%d", turnNo, n, i)
			}
			calls[i].Type = "function"
		}
		final = st.text
		if st.cut {
			final += fmt.Sprintf("\n[cut: the answer passed %d bytes]", maxStepText)
		}
		if err := s.add(turnNo, chatMessage{Role: "assistant", Content: st.text, ToolCalls: calls}); err != nil {
			return final, "", err
		}
		if len(calls) == 0 {
			return final, "", nil
		}
		if n >= s.opts.maxSteps {
			if err := s.skip(turnNo, calls, "not run: the turn reached max_steps"); err != nil {
				return final, "", err
			}
			return final, fmt.Sprintf("stopped after max_steps = %d model requests in one turn: the model was still calling tools (%s); send it a message to go on, or raise max_steps in [agent.openai]",
				s.opts.maxSteps, callNames(calls)), nil
		}
		for i, c := range calls {
			if ctx.Err() != nil {
				if err := s.skip(turnNo, calls[i:], "not run: the turn was interrupted"); err != nil {
					return final, "", err
				}
				return final, "interrupted", nil
			}
			out := s.call(ctx, in.Turn, c)
			if err := s.add(turnNo, chatMessage{Role: "tool", ToolCallID: c.ID, Content: out}); err != nil {
				return final, "", err
			}
		}
		if err := s.flush(ctx); err != nil { // the step: its answer and results in one commit
			return final, "", err
		}
	}
}

func callNames(calls []toolCall) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Function.Name
	}
	return strings.Join(names, ", ")
}

// skip answers calls that were not run, so the conversation stays one the
// API takes (every call has its result).
func (s *Session) skip(turnNo int64, calls []toolCall, why string) error {
	for _, c := range calls {
		if err := s.add(turnNo, chatMessage{Role: "tool", ToolCallID: c.ID, Content: why}); err != nil {
			return err
		}
	}
	return nil
}

// add appends a message to the conversation in memory; flush stores what
// was added since the last flush.
func (s *Session) add(turnNo int64, m chatMessage) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	s.hist = append(s.hist, histEntry{turn: turnNo, data: data})
	s.pending = append(s.pending, troupe.ConversationEntry{Turn: turnNo, Data: data})
	return nil
}

// flush stores the messages added since the last flush in one
// transaction (one commit per step of the loop), even when the turn was
// interrupted (its context is not the store's).
func (s *Session) flush(ctx context.Context) error {
	if len(s.pending) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := s.store.AppendChat(sctx, s.key, s.conv, s.pending); err != nil {
		return fmt.Errorf("store conversation %s: %w", s.conv, err)
	}
	s.pending = s.pending[:0]
	return nil
}

// size is the request's size in bytes, near enough: its messages and tools.
func (s *Session) size() int {
	n := len(s.sysBytes) + len(s.toolDefs)
	for _, h := range s.hist {
		n += len(h.data) + 1
	}
	return n
}

// tokens estimates the request's size in tokens.
func (s *Session) tokens() int { return s.toTokens(s.size()) }

func (s *Session) toTokens(bytes int) int {
	if s.bpt > 0 {
		return int(float64(bytes) / s.bpt)
	}
	return bytes / bytesPerToken
}

// calibrate learns how many bytes make a token for this model from what
// the server counted for a request of n bytes. A count that makes less
// than 1 or more than 8 bytes a token is not taken (a server that reports
// no real count).
func (s *Session) calibrate(n int, prompt int64) {
	if prompt <= 0 {
		return
	}
	if r := float64(n) / float64(prompt); r >= 1 && r <= 8 {
		s.bpt = r
	}
}

// fit drops the oldest turns of the conversation (never the running one)
// when the request would pass the budget (max_context_tokens less a
// reserve for the answer), down to three quarters of it, the tokens
// estimated from the bytes at the rate the server last counted. It says
// so with an EventNotice, and whether the running turn alone is over.
func (s *Session) fit(ctx context.Context, turn troupe.TurnID, current int64) (bool, error) {
	budget := s.opts.maxContextTokens - min(4096, s.opts.maxContextTokens/4)
	have := s.tokens()
	if have <= budget {
		return false, nil
	}
	// Down to three quarters of the budget, so that the next turns fit
	// without a trim (one store write) at every step.
	target := budget * 3 / 4
	drop, turns := 0, 0
	size := s.size()
	for drop < len(s.hist) && s.hist[drop].turn < current && s.toTokens(size) > target {
		t := s.hist[drop].turn
		for drop < len(s.hist) && s.hist[drop].turn == t {
			size -= len(s.hist[drop].data) + 1
			drop++
		}
		turns++
	}
	if drop > 0 {
		keep := s.hist[drop].turn
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		err := s.store.TrimChat(sctx, s.key, s.conv, keep)
		cancel()
		if err != nil {
			return false, fmt.Errorf("trim conversation %s: %w", s.conv, err)
		}
		s.hist = append([]histEntry(nil), s.hist[drop:]...)
		msg := fmt.Sprintf("dropped the %d oldest turns of the conversation (%d messages, about %d tokens) to stay within max_context_tokens = %d",
			turns, drop, have-s.toTokens(size), s.opts.maxContextTokens)
		s.log.Info("context budget", "dropped_turns", turns, "dropped_messages", drop)
		s.Emit(engine.Event{Kind: engine.EventNotice, Turn: turn, Text: msg})
	}
	return s.tokens() > budget, nil
}

// body is the request: the model, the stream flags, the system message,
// the conversation and the tools, from the bytes kept. It reuses the
// buffer of the last request (sent by then).
func (s *Session) body() []byte {
	n := 128 + len(s.prefix) + len(s.sysBytes) + len(s.toolDefs)
	for _, h := range s.hist {
		n += len(h.data) + 1
	}
	if cap(s.bodyBuf) < n {
		s.bodyBuf = make([]byte, 0, n+n/4)
	}
	b := bytes.NewBuffer(s.bodyBuf[:0])
	b.WriteString(`{"model":`)
	b.Write(s.prefix)
	b.WriteString(`,"stream":true,"stream_options":{"include_usage":true},"messages":[`)
	first := true
	if s.sysBytes != nil {
		b.Write(s.sysBytes)
		first = false
	}
	for _, h := range s.hist {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(h.data)
	}
	b.WriteByte(']')
	if s.toolDefs != nil {
		b.WriteString(`,"tools":`)
		b.Write(s.toolDefs)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// loadHistory rebuilds a stored conversation: entries in order, and a
// result for every tool call that has none (a daemon that died between
// the call and its result), so the API takes it. It returns the next
// turn's number.
func loadHistory(entries []troupe.ConversationEntry) ([]histEntry, int64, error) {
	var hist []histEntry
	next := int64(1)
	var open []string // calls of the last assistant message still without a result
	flush := func(turn int64) {
		for _, id := range open {
			data, _ := json.Marshal(chatMessage{Role: "tool", ToolCallID: id, Content: "not run: troupe stopped before this call ended"})
			hist = append(hist, histEntry{turn: turn, data: data})
		}
		open = nil
	}
	for i, e := range entries {
		var m chatMessage
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return nil, 0, fmt.Errorf("entry %d: %w", i, err)
		}
		if m.Role != "tool" {
			flush(e.Turn)
		}
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
		case "tool":
			for j, id := range open {
				if id == m.ToolCallID {
					open = append(open[:j], open[j+1:]...)
					break
				}
			}
		}
		hist = append(hist, histEntry{turn: e.Turn, data: e.Data})
		next = max(next, e.Turn+1)
	}
	if len(hist) > 0 {
		flush(hist[len(hist)-1].turn)
	}
	return hist, next, nil
}
