package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// Engine is the engine of the agents that run on a runner: it starts
// their sessions there. It is checked and bounded as the agent's own
// engine here.
func (d *Daemon) Engine() engine.Engine { return remoteEngine{d} }

type remoteEngine struct{ d *Daemon }

var (
	_ engine.ToolCallLimiter = remoteEngine{}
	_ engine.InputLimiter    = remoteEngine{}
)

func (e remoteEngine) local(a troupe.AgentSpec) engine.Engine { return e.d.o.Engines[a.Engine] }

func (e remoteEngine) Check(a troupe.AgentSpec) error {
	l := e.local(a)
	if l == nil {
		return &troupe.FieldError{Field: "engine", Msg: fmt.Sprintf("%q is not built into this troupe", a.Engine)}
	}
	return l.Check(a)
}

func (e remoteEngine) ToolCallLimit(a troupe.AgentSpec) time.Duration {
	if l, ok := e.local(a).(engine.ToolCallLimiter); ok {
		return l.ToolCallLimit(a)
	}
	return 0
}

func (e remoteEngine) InputLimit(a troupe.AgentSpec) (int, int) {
	if l, ok := e.local(a).(engine.InputLimiter); ok {
		return l.InputLimit(a)
	}
	return 0, 0
}

// Start starts the agent's session on its runner. spec.Dir is the agent's
// worktree here: the runner brings its own clone to its head, and the
// agent works in a worktree of that clone on the same branch.
func (e remoteEngine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	d := e.d
	name, err := d.pick(spec.Agent)
	if err != nil {
		return nil, err
	}
	head, err := worktree.Head(ctx, spec.Dir)
	if err != nil {
		return nil, fmt.Errorf("start session on runner %s: %w", name, err)
	}
	s := &session{SessionCore: engine.NewSessionCore(256), d: d, id: newID(), runner: name, key: spec.Key, spec: spec}
	if isTerminal(spec.Agent) {
		s.term = newRemoteTerm(s)
	}
	d.mu.Lock()
	if d.ctx == nil || d.ctx.Err() != nil {
		d.mu.Unlock()
		return nil, errors.New("start remote session: the daemon's runner link is not running")
	}
	d.sessions[s.id] = s
	d.mu.Unlock()
	req := startReq{Session: s.id, Key: spec.Key, Agent: spec.Agent, Instructions: spec.Instructions,
		Resume: spec.Resume, MCPToken: spec.MCP.Token, Head: head}
	if spec.Tools != nil {
		req.Tools = spec.Tools.Specs()
	}
	if _, err := d.request(ctx, name, opStart, req); err != nil {
		s.forget()
		if errors.Is(err, errNotConnected) {
			return nil, d.unreachable(name)
		}
		return nil, fmt.Errorf("start session on runner %s: %w", name, err)
	}
	s.Bump()
	d.log.Info("session started on runner", "project", spec.Key.Project, "agent", spec.Key.Agent, "runner", name, "session", s.id)
	return s, nil
}

// request sends op to runner name and waits for its answer.
func (d *Daemon) request(ctx context.Context, name, op string, v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", op, err)
	}
	m, err := d.o.Conn.RequestWithContext(ctx, bus.ToRunner(name)+"."+op, b)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("runner %s: %w", name, errNotConnected)
	}
	if err != nil {
		return nil, fmt.Errorf("runner %s: %s: %w", name, op, err)
	}
	var rep reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, fmt.Errorf("decode runner %s's answer: %w", name, err)
	}
	if rep.Error != "" {
		return nil, errors.New(rep.Error)
	}
	return rep.Data, nil
}

// closeWait bounds the wait for a runner's answer to a session's
// request (a close waits for its engine's stop by escalation, a few
// seconds at most).
const closeWait = 30 * time.Second

// errNotConnected: nobody answers on the runner's subjects.
var errNotConnected = errors.New("not connected")

// session is the daemon's side of one session on a runner: the runtime
// drives it as any engine's; its events come from the runner's stream.
type session struct {
	*engine.SessionCore
	d      *Daemon
	id     string
	runner string
	key    troupe.RuntimeKey
	spec   engine.StartSpec

	remoteAct atomic.Uint64 // the runner's activity count of the session, from its beats

	// emu orders the hand-over of records with the session's end: no
	// event is emitted after Finish closed Events.
	emu   sync.Mutex
	seq   uint64 // the last record handed on
	ended bool

	bmu        sync.Mutex // guards bundleHead
	bundleHead string

	term *remoteTerm // a terminal-mode agent's terminal (terminal.go); nil for others
}

func (s *session) Send(ctx context.Context, in engine.Input) error {
	if _, err := s.BeginTurn(ctx, in, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	if _, err := s.d.request(ctx, s.runner, opSend, sessionReq{Session: s.id, Input: &in}); err != nil {
		s.Mu.Lock()
		s.EndTurnLocked()
		s.Mu.Unlock()
		return fmt.Errorf("send turn %s: %w", in.Turn, err)
	}
	return nil
}

func (s *session) Interrupt(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	_, err := s.d.request(ctx, s.runner, opInterrupt, sessionReq{Session: s.id})
	return err
}

// Close closes the session on its runner (when it can be reached) and
// here.
func (s *session) Close(ctx context.Context) error {
	return s.Shutdown(ctx, "close remote session", func(ctx context.Context) {
		// A runner known gone is not waited on: it closes the session
		// itself when it comes back (its hello).
		if s.d.Reachable(s.runner) == nil {
			ctx, cancel := context.WithTimeout(ctx, closeWait)
			defer cancel()
			if _, err := s.d.request(ctx, s.runner, opClose, sessionReq{Session: s.id}); err != nil {
				s.d.log.Warn("close a session on its runner", "runner", s.runner, "session", s.id, "err", err)
			}
		}
		s.end(nil)
	})
}

// receive takes one record of the runner's stream: an event, or the
// session's end. A record seen already (a redelivery) is dropped.
func (s *session) receive(rec durable) {
	if rec.Ended {
		var err error
		if rec.Err != "" {
			err = errors.New(rec.Err)
		}
		s.end(err)
		return
	}
	s.emu.Lock()
	defer s.emu.Unlock()
	if s.ended || rec.Seq <= s.seq || rec.Event == nil {
		return
	}
	s.seq = rec.Seq
	s.Bump()
	ev := *rec.Event
	if ev.Kind == engine.EventTurnEnd {
		if rec.Snapshot != "" {
			if err := s.pull(rec.Snapshot); err != nil {
				s.d.log.Warn("bring a remote turn's files", "project", s.key.Project, "agent", s.key.Agent, "err", err)
				s.Emit(engine.Event{Kind: engine.EventNotice, Turn: ev.Turn,
					Text: fmt.Sprintf("the files of this turn stay on runner %s: %v", s.runner, err)})
			}
		}
		// Idle before the end is handed on: its reader may send the next
		// turn at once.
		s.Mu.Lock()
		if cur, _ := s.TurnLocked(); cur == ev.Turn {
			s.EndTurnLocked()
		}
		s.Mu.Unlock()
		s.Emit(ev)
		return
	}
	s.Emit(ev)
}

// pull brings a turn's snapshot from the runner and makes the agent's
// worktree here hold its files.
func (s *session) pull(commit string) error {
	ctx, cancel := context.WithTimeout(s.Context(), 5*time.Minute)
	defer cancel()
	have, _ := worktree.Tips(ctx, s.spec.Dir)
	path, err := fetchChunks(filepath.Join(s.d.o.Dir, "bundles"), MaxSnapshot, func(off int64) (bundleChunk, error) {
		return chunk(s.d.request(ctx, s.runner, opSnapshot, snapshotReq{Session: s.id, Commit: commit, Have: have, Offset: off}))
	})
	if err != nil {
		return fmt.Errorf("fetch the turn's files: %w", err)
	}
	defer os.Remove(path)
	return worktree.ApplySnapshot(ctx, s.spec.Dir, path, commit)
}

// MaxSnapshot bounds the bundle of one turn's files a daemon takes from a
// runner.
const MaxSnapshot = 1 << 30

// unreachable ends the turn in flight on u (the runtime keeps its
// messages and closes the session), or, with none, the session itself.
func (s *session) unreachable(u *engine.Unreachable) {
	if s.term != nil {
		s.term.closeAll(u.Error())
	}
	s.emu.Lock()
	turn := s.CurrentTurn()
	if !s.ended && turn != "" {
		s.Mu.Lock()
		s.EndTurnLocked()
		s.Mu.Unlock()
		s.Emit(engine.Event{Kind: engine.EventTurnEnd, Turn: turn, Error: u.Error(), Limit: &engine.Limit{Unreachable: u}})
		s.emu.Unlock()
		return
	}
	s.emu.Unlock()
	s.end(u)
}

// end ends the session once: its events close, Err says why (nil: closed).
func (s *session) end(err error) {
	s.emu.Lock()
	defer s.emu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	if s.term != nil {
		reason := "the session ended"
		if err != nil {
			reason += ": " + err.Error()
		}
		s.term.closeAll(reason)
	}
	s.forget()
	s.Finish(func() error { return err }, nil)
}

// forget removes the session from the daemon's table and its bundle.
func (s *session) forget() {
	s.d.mu.Lock()
	if s.d.sessions[s.id] == s {
		delete(s.d.sessions, s.id)
	}
	s.d.mu.Unlock()
	if s.d.o.Dir != "" {
		_ = os.Remove(bundlePath(s.d.o.Dir, s.id))
	}
}
