// Package jsonrpc is troupe's one JSON-RPC 2.0 transport: newline-delimited
// messages over a child process's stdio, as Codex's app-server and every
// Agent Client Protocol agent speak it. The engines (internal/engine/codex,
// internal/engine/acp) keep their protocols' methods and shapes; this
// package keeps the framing and the bookkeeping:
//
//   - ids: troupe's requests are numbered 1, 2, 3… per connection; the
//     peer's answers are matched by that number (an answer whose id is no
//     integer matches nothing); an id of null counts as none;
//   - pending calls: Call waits for its answer, its context or the end of
//     the peer's output, whichever comes first (a call that gave up forgets
//     its id: a late answer is dropped); Go hands the answer to a callback
//     on the reader goroutine, in the order of the peer's lines;
//   - notifications of the peer go to Options.OnNotification, in order, on
//     the reader goroutine;
//   - requests of the peer (server → client) go to Options.OnRequest; a
//     method it does not take is answered -32601 "troupe does not serve …";
//   - each line read is at most Options.MaxLine bytes: a longer one ends
//     the connection with ErrLineTooLong, Options.Kill stops the peer (it
//     would block writing to a pipe nobody reads) and the rest of its
//     output is read and dropped;
//   - a clean close: Run returns once the peer's output ends (nil at end of
//     file); every Call still waiting then returns ErrClosed, a Go callback
//     still waiting is never called, and later calls fail at once with
//     ErrClosed. Closing the peer's input is its owner's (the process's).
//
// Lines that are not JSON-RPC are logged and skipped.
//
// Concurrency: Run is the one reader goroutine, owned by whoever owns the
// child; Call, Go, Notify, Reply and ReplyError are safe for concurrent
// use (one line at a time goes to the writer). The callbacks run on the
// reader goroutine and must not block it: work that waits (a permission
// asked of a person) goes to a goroutine of the caller's.
//
// Who may import: the engines that speak JSON-RPC over stdio. It depends
// on nothing of troupe.
package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// DefaultMaxLine bounds a line when Options.MaxLine is 0.
const DefaultMaxLine = 16 << 20

// CodeMethodNotFound is the error code of a request for a method troupe
// does not serve.
const CodeMethodNotFound = -32601

// ErrClosed is the error of a call whose answer cannot come: the peer's
// output ended.
var ErrClosed = errors.New("its output ended")

// ErrLineTooLong is what Run returns after a line over Options.MaxLine.
var ErrLineTooLong = bufio.ErrTooLong

// Message is one JSON-RPC message, in either direction: a request (ID and
// Method), a notification (Method only) or a response (ID with Result or
// Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest, IsNotification and IsResponse classify a message.
func (m Message) IsRequest() bool      { return m.Method != "" && len(m.ID) > 0 }
func (m Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }
func (m Message) IsResponse() bool     { return m.Method == "" && len(m.ID) > 0 }

// IntID is the message's id as a number (troupe numbers its requests).
func (m Message) IntID() (int64, bool) {
	var n int64
	if err := json.Unmarshal(m.ID, &n); err != nil {
		return 0, false
	}
	return n, true
}

// Error is a JSON-RPC error object. Its Error text is the message, then
// the data when it is a string or short.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	msg := e.Message
	if len(e.Data) > 0 && string(e.Data) != "null" {
		var s string
		if json.Unmarshal(e.Data, &s) == nil {
			msg += ": " + s
		} else if d := string(e.Data); len(d) <= 500 {
			msg += ": " + d
		}
	}
	return msg
}

// Parse decodes one line. A message needs a method or an id; an id of
// null counts as none.
func Parse(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode json-rpc line: %w", err)
	}
	if bytes.Equal(m.ID, []byte("null")) {
		m.ID = nil
	}
	if m.Method == "" && len(m.ID) == 0 {
		return m, errors.New("decode json-rpc line: neither a method nor an id")
	}
	return m, nil
}

// Options configure a Conn. Name and the callbacks may be left zero.
type Options struct {
	Name    string       // the peer, in errors and logs ("codex")
	Log     *slog.Logger // nil: discard
	MaxLine int          // 0: DefaultMaxLine
	// OnLine runs for every line read, before it is handled (an activity
	// token).
	OnLine func()
	// OnNotification gets the peer's notifications.
	OnNotification func(method string, params json.RawMessage)
	// OnRequest gets the peer's requests, to answer with Reply or
	// ReplyError (then or later, from any goroutine); it returns false for
	// a method it does not serve, which the Conn then refuses.
	OnRequest func(id json.RawMessage, method string, params json.RawMessage) bool
	// Kill stops the peer after a line over MaxLine.
	Kill func() error
}

// Conn is one JSON-RPC connection: the peer's output r, its input w.
type Conn struct {
	r   io.Reader
	w   io.Writer
	o   Options
	log *slog.Logger

	wmu sync.Mutex // serialises lines to w

	done chan struct{} // closed when Run has ended

	mu sync.Mutex
	// mu guards the fields below.
	next    int64
	pending map[int64]func(Message)
	closed  bool
}

// New makes a Conn; Run reads it.
func New(r io.Reader, w io.Writer, o Options) *Conn {
	if o.MaxLine <= 0 {
		o.MaxLine = DefaultMaxLine
	}
	if o.Name == "" {
		o.Name = "the peer"
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Conn{r: r, w: w, o: o, log: log, done: make(chan struct{}), pending: map[int64]func(Message){}}
}

// Done is closed once Run has returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Run reads the peer's lines until its output ends, dispatching each; see
// the package doc. It returns nil at end of file, else why it stopped
// reading (ErrLineTooLong, after Kill and the drain).
func (c *Conn) Run() error {
	defer func() {
		c.mu.Lock()
		c.closed, c.pending = true, nil
		c.mu.Unlock()
		close(c.done)
	}()
	sc := bufio.NewScanner(c.r)
	sc.Buffer(make([]byte, 0, min(64<<10, c.o.MaxLine)), c.o.MaxLine)
	for sc.Scan() {
		if c.o.OnLine != nil {
			c.o.OnLine()
		}
		m, err := Parse(sc.Bytes())
		if err != nil {
			c.log.Warn(c.o.Name+" wrote a line that is not JSON-RPC", "err", err)
			continue
		}
		c.dispatch(m)
	}
	err := sc.Err()
	if err == nil {
		return nil
	}
	if c.o.Kill != nil {
		if kerr := c.o.Kill(); kerr != nil {
			c.log.Warn("kill "+c.o.Name, "err", kerr)
		}
	}
	io.Copy(io.Discard, c.r)
	return fmt.Errorf("read %s's output: %w", c.o.Name, err)
}

func (c *Conn) dispatch(m Message) {
	switch {
	case m.IsResponse():
		id, ok := m.IntID()
		c.mu.Lock()
		then := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if !ok || then == nil {
			c.log.Debug(c.o.Name+" answered a request troupe did not send", "id", string(m.ID))
			return
		}
		then(m)
	case m.IsNotification():
		if c.o.OnNotification != nil {
			c.o.OnNotification(m.Method, m.Params)
		}
	case m.IsRequest():
		if c.o.OnRequest != nil && c.o.OnRequest(m.ID, m.Method, m.Params) {
			return
		}
		c.log.Warn(c.o.Name+" sent a request troupe does not serve", "method", m.Method)
		if err := c.ReplyError(m.ID, CodeMethodNotFound, "troupe does not serve "+m.Method); err != nil {
			c.log.Debug("answer "+m.Method, "err", err)
		}
	}
}

// Call sends a request and waits for its answer: its result, its error
// (an *Error), ctx's cause, or ErrClosed.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan Message, 1)
	id, err := c.Go(method, params, func(m Message) { ch <- m })
	if err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, fmt.Errorf("%s: %w", method, context.Cause(ctx))
	case <-c.done:
		return nil, fmt.Errorf("%s: %s: %w", method, c.o.Name, ErrClosed)
	}
}

// Go sends a request whose answer goes to then, on the reader goroutine
// (which it must not block); it returns the request's id. Without an
// answer (the peer's output ended) then is never called.
func (c *Conn) Go(method string, params any, then func(Message)) (int64, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", method, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, fmt.Errorf("%s: %s: %w", method, c.o.Name, ErrClosed)
	}
	c.next++
	id := c.next
	c.pending[id] = then
	c.mu.Unlock()
	idRaw, _ := json.Marshal(id)
	if err := c.write(Message{ID: idRaw, Method: method, Params: raw}); err != nil {
		c.forget(id)
		return 0, err
	}
	return id, nil
}

func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Notify sends a notification; nil params are left out.
func (c *Conn) Notify(method string, params any) error {
	m := Message{Method: method}
	if params != nil {
		raw, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("encode %s: %w", method, err)
		}
		m.Params = raw
	}
	return c.write(m)
}

// Reply answers the peer's request id with result.
func (c *Conn) Reply(id json.RawMessage, result any) error {
	raw, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	return c.write(Message{ID: id, Result: raw})
}

// ReplyError answers the peer's request id with an error.
func (c *Conn) ReplyError(id json.RawMessage, code int64, msg string) error {
	return c.write(Message{ID: id, Error: &Error{Code: code, Message: msg}})
}

// write sends one message as one line.
func (c *Conn) write(m Message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode json-rpc message: %w", err)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("write to %s: %w", c.o.Name, err)
	}
	return nil
}
