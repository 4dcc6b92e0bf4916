// Package fakemodel is a scripted model server for tests and dry runs. It
// speaks the Anthropic Messages API (SSE and JSON), the OpenAI Responses API
// (SSE and JSON) and OpenAI Chat Completions (SSE and JSON) on 127.0.0.1, so
// agent CLIs (Claude Code, Codex, OpenCode) and troupe's own engines run with
// no network and no API key. `troupe fakemodel` serves it on a fixed address
// for dry runs by hand.
//
// The reply to a model request is chosen in this order: side queries of the
// CLIs (session titles, Claude's auto-mode classifier) get fixed answers;
// then a reply queued with Push; then the Script (Options.Script or
// SetScript); then DefaultScript, which reads markers such as [[text:X]] or
// [[tool:NAME {json}]] in the last user message (see ParseMarkers). Every
// request is recorded, with the reply chosen, for assertions (Requests,
// WaitRequests); the record is bounded (Options.KeepRequests, KeepBytes):
// past it the oldest requests are dropped, and Dropped counts them.
//
// It listens on loopback only (Start), unless Options.AllowRemote: its
// answers are scripted by whoever reaches it, and its record holds what
// clients sent (prompts, keys in headers).
//
// Concurrency: a Server is safe for concurrent use. net/http runs each
// request in its own goroutine; every wait in a handler (delays, silences,
// slow streams, Reply.Hold) also selects on the server's done channel, so
// Close returns promptly however a reply is scripted, and Close waits for the
// handlers to return. The Script is called from handler goroutines, one call
// per request, possibly concurrently.
//
// Imported by tests of the engines, the runtime and the daemon, and by
// internal/cli for `troupe fakemodel`. It imports nothing of troupe's.
package fakemodel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// DefaultMaxBody bounds a request body; a larger one gets 413.
const DefaultMaxBody = 32 << 20

// The bounds of the record of requests by default: the newest
// DefaultKeepRequests requests, of at most DefaultKeepBytes together.
const (
	DefaultKeepRequests = 1000
	DefaultKeepBytes    = 256 << 20
)

// Script chooses the reply to one model request. It is called concurrently
// from handler goroutines.
type Script func(Request) Reply

// Options configure a Server. The zero value is usable.
type Options struct {
	Logger  *slog.Logger // nil: discard
	Script  Script       // nil: DefaultScript
	MaxBody int64        // request body limit in bytes; 0: DefaultMaxBody
	// KeepRequests and KeepBytes bound the record of requests: the newest
	// KeepRequests of them, of at most KeepBytes together (a request
	// counts its body, headers, prompt, tool result and reply text); the
	// newest is kept whatever its size. 0: DefaultKeepRequests,
	// DefaultKeepBytes.
	KeepRequests int
	KeepBytes    int64
	// AllowRemote lets Start listen on an address that is not loopback.
	AllowRemote bool
}

// Server is the fake model. Use it as an http.Handler (httptest.NewServer,
// then Close the Server before the httptest server) or Start it on an address.
type Server struct {
	log         *slog.Logger
	maxBody     int64
	keepReqs    int
	keepBytes   int64
	allowRemote bool
	run         string        // random, in every id the server hands out (newRunID)
	done        chan struct{} // closed by Close: every wait in a handler selects on it

	handlers sync.WaitGroup // handlers in flight; Add only under mu while !closed
	serving  sync.WaitGroup // the http.Server's Serve loop, when Started

	mu      sync.Mutex // mu guards the fields below
	closed  bool
	script  Script
	queue   []Reply
	reqs    []Request     // the newest requests, within keepReqs and keepBytes
	sizes   []int64       // the size of each of reqs (recordSize)
	kept    int64         // the sum of sizes
	seen    int           // requests recorded, dropped ones included
	dropped int           // the oldest requests dropped to keep the bounds
	changed chan struct{} // closed and replaced when a request is recorded
	limits  []limitEntry  // prompts under a [[limit:…]], oldest first, at most maxLimits
	hs      *http.Server
	url     string
}

// New returns a Server that is not listening yet.
func New(o Options) *Server {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	max := o.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	keepReqs, keepBytes := o.KeepRequests, o.KeepBytes
	if keepReqs <= 0 {
		keepReqs = DefaultKeepRequests
	}
	if keepBytes <= 0 {
		keepBytes = DefaultKeepBytes
	}
	return &Server{log: log, maxBody: max, keepReqs: keepReqs, keepBytes: keepBytes, allowRemote: o.AllowRemote,
		done: make(chan struct{}), script: o.Script, changed: make(chan struct{}), run: newRunID()}
}

// Start listens on addr ("" means 127.0.0.1:0, a free loopback port) and
// serves until Close. An address that is not loopback (0.0.0.0, a LAN
// address, a name that resolves to one) is refused unless
// Options.AllowRemote.
func (s *Server) Start(addr string) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen fake model on %s: %w", addr, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() && !s.allowRemote {
		ln.Close()
		return fmt.Errorf("listen fake model on %s: %w", addr, ErrNotLoopback)
	}
	hs := &http.Server{Handler: s, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	s.mu.Lock()
	if s.closed || s.hs != nil {
		s.mu.Unlock()
		ln.Close()
		return errors.New("start fake model: already started or closed")
	}
	s.hs = hs
	s.url = "http://" + ln.Addr().String()
	s.mu.Unlock()
	s.serving.Go(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve fake model", "err", err)
		}
	})
	s.log.Info("fake model listening", "url", s.url)
	return nil
}

// URL is the base URL after Start, like http://127.0.0.1:41234 (no /v1).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops the server: waiting handlers give up at once, open connections
// are closed, and Close returns when every handler has returned. It may be
// called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	hs := s.hs
	s.mu.Unlock()
	close(s.done)
	var err error
	if hs != nil {
		err = hs.Close()
	}
	s.serving.Wait()
	s.handlers.Wait()
	if err != nil {
		return fmt.Errorf("close fake model: %w", err)
	}
	return nil
}

// SetScript replaces the script (nil: DefaultScript).
func (s *Server) SetScript(fn Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = fn
}

// Push queues replies: each model request that is not a side query takes
// the first queued reply, before the script is asked.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// ErrNotLoopback is Start's error for an address beyond this machine.
var ErrNotLoopback = errors.New("not a loopback address: anyone who reaches it would script the answers and read what clients sent; listen on 127.0.0.1, or allow it (Options.AllowRemote, troupe fakemodel --allow-remote)")

// Requests returns a copy of the requests recorded so far that are kept
// (the newest, within Options.KeepRequests and KeepBytes), in arrival
// order; their Seq counts the dropped ones too.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Dropped is how many of the oldest requests were dropped from the record
// to keep it within its bounds.
func (s *Server) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// WaitRequests waits until at least n requests have been recorded and
// returns those kept (as Requests: fewer than n when some were dropped).
// It fails when ctx ends or the server closes first.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		if s.seen >= n {
			r := append([]Request(nil), s.reqs...)
			s.mu.Unlock()
			return r, nil
		}
		ch, have := s.changed, s.seen
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %d fake model requests (have %d): %w", n, have, ctx.Err())
		case <-s.done:
			return nil, fmt.Errorf("wait for %d fake model requests (have %d): server closed", n, have)
		}
	}
}

// record numbers req and stores it, body the bytes read of it; then drops
// the oldest requests while the record is over its bounds (the newest
// stays).
func (s *Server) record(req *Request, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	req.Seq = s.seen
	req.run = s.run
	size := recordSize(req, body)
	s.reqs = append(s.reqs, *req)
	s.sizes = append(s.sizes, size)
	s.kept += size
	n := 0
	for len(s.reqs)-n > 1 && (len(s.reqs)-n > s.keepReqs || s.kept > s.keepBytes) {
		s.kept -= s.sizes[n]
		n++
	}
	if n > 0 {
		if s.dropped == 0 {
			s.log.Info("fake model: its record of requests is full; the oldest are dropped from now on",
				"keep_requests", s.keepReqs, "keep_bytes", s.keepBytes)
		}
		s.dropped += n
		clear(s.reqs[:n]) // let the dropped bodies go
		s.reqs = s.reqs[n:]
		s.sizes = s.sizes[n:]
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// recordSize is what req counts against Options.KeepBytes: its body (the
// parsed Body holds as much), its headers, and the texts read from it and
// chosen for it.
func recordSize(req *Request, body []byte) int64 {
	n := len(body) + len(req.Path) + len(req.Query) + len(req.Prompt) + len(req.ToolResult) + len(req.Reply.Text)
	for k, vs := range req.Header {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	for _, t := range req.Tools {
		n += len(t)
	}
	return int64(n)
}

// choose picks the reply for a model request (see the package doc).
func (s *Server) choose(req Request) Reply {
	if r, ok := sideReply(req); ok {
		return r
	}
	s.mu.Lock()
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r
	}
	fn := s.script
	s.mu.Unlock()
	if fn == nil {
		fn = DefaultScript
	}
	return fn(req)
}
