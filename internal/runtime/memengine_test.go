package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// memEngine is an in-process engine for fake-time tests: its sessions run
// a tiny script found in the first message of each turn, with timers only
// (no I/O), so a synctest bubble can advance time through them.
//
//	answer TEXT                  end the turn with TEXT
//	big N                        end the turn with N bytes of "é"
//	work DUR every STEP line|chunk then TEXT   output every STEP for DUR
//	                             (then hang: no end of turn at all)
//	silent DUR then TEXT         no output for DUR
//	die                          the session ends mid-turn
//	fail TEXT                    the engine fails the turn with TEXT
//	tool NAME JSON               call a troupe tool; answer with its result
//	rich SESSION                 report every event kind (output in three
//	                             chunks, a 5 KB tool input, session id
//	                             SESSION, permission requests for Read and
//	                             Bash), then end with the decisions
//	perm TOOL...                 ask the Approver for each tool in turn (its
//	                             ctx ends when the session closes or the turn
//	                             is interrupted), echo each decision as an
//	                             EventPermission, end with "TOOL:true" or
//	                             "TOOL:false(REASON)" each
//
// Interrupt ends a waiting turn (silent, work, perm) with the error
// "interrupted", as real engines do.
//
//	blocked DUR then TEXT        report EventBlocked ("a dialog"), no output
//	                             for DUR, unblock, end with TEXT
//	session ID                   report conversation id ID, answer "ok"
//	running DUR limit LIM then TEXT  call the engine's own tool Bash (go test
//	                             ./..., its Limit LIM, "none": 0), silent for
//	                             DUR, its result, end with TEXT
//	limited DUR times N then TEXT  the first N turns of this text end on a
//	                             usage limit resetting DUR later ("none": no
//	                             reset time given); the next ends with TEXT
//	anything else                "echo: " + the texts of the batch
type memEngine struct {
	mu        sync.Mutex // guards the fields below
	starts    int
	live      int // sessions started and not closed
	peak      int // the most live at once
	specs     []engine.StartSpec
	inputs    []engine.Input
	decisions []engine.Decision // what Approve returned to perm scripts
	// limit is what InputLimit declares: messages, bytes (0: none).
	limit [2]int
	// limited counts the turns each "limited" text has ended on a limit.
	limited map[string]int
}

// InputLimit implements engine.InputLimiter with what the test set.
func (e *memEngine) InputLimit(troupe.AgentSpec) (messages, bytes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.limit[0], e.limit[1]
}

func (e *memEngine) setLimit(messages, bytes int) {
	e.mu.Lock()
	e.limit = [2]int{messages, bytes}
	e.mu.Unlock()
}

// engineOther is a second engine name the memEngine also serves.
const engineOther troupe.Engine = "other"

func (e *memEngine) Decisions() []engine.Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Decision(nil), e.decisions...)
}

// Check implements engine.Engine: a memEngine takes any definition.
func (e *memEngine) Check(troupe.AgentSpec) error { return nil }

func (e *memEngine) Start(ctx context.Context, spec engine.StartSpec) (engine.Session, error) {
	e.mu.Lock()
	e.starts++
	e.live++
	e.peak = max(e.peak, e.live)
	e.specs = append(e.specs, spec)
	e.mu.Unlock()
	// Options["start_delay"]: the session takes that long to start (a slow
	// CLI), or until ctx ends.
	if d, ok := spec.Agent.Options["start_delay"].(time.Duration); ok {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			e.mu.Lock()
			e.live--
			e.mu.Unlock()
			return nil, context.Cause(ctx)
		}
	}
	ms := &memSession{e: e, spec: spec, events: make(chan engine.Event, 64), closed: make(chan struct{})}
	if spec.Agent.Mode == troupe.ModeTerminal {
		return &memTermSession{memSession: ms, term: &memTerminal{}}, nil
	}
	return ms, nil
}

// memTermSession is a memSession in terminal mode: it has a terminal,
// which the test marks attached or not.
type memTermSession struct {
	*memSession
	term *memTerminal
}

func (s *memTermSession) Terminal() engine.Terminal { return s.term }

type memTerminal struct {
	mu       sync.Mutex
	attached bool
}

func (t *memTerminal) Attach() (engine.TerminalViewer, error) {
	return nil, errors.New("memTerminal: no viewer")
}
func (t *memTerminal) Size() (int, int) { return 80, 24 }
func (t *memTerminal) InUse() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attached
}
func (t *memTerminal) set(on bool) {
	t.mu.Lock()
	t.attached = on
	t.mu.Unlock()
}

// startCount is the number of sessions started.
func (e *memEngine) startCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.starts
}

// Peak is the most sessions that were live at once.
func (e *memEngine) Peak() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peak
}

func (e *memEngine) Specs() []engine.StartSpec {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.StartSpec(nil), e.specs...)
}

func (e *memEngine) Inputs() []engine.Input {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Input(nil), e.inputs...)
}

type memSession struct {
	e    *memEngine
	spec engine.StartSpec

	events chan engine.Event // sent to and closed by play, or closed by Close after play ended
	closed chan struct{}

	mu       sync.Mutex // guards the fields below
	act      engine.Activity
	busy     bool
	intr     chan struct{} // closed by Interrupt; the turn's
	err      error
	evClosed bool
	once     sync.Once
	wg       sync.WaitGroup
}

func (s *memSession) Events() <-chan engine.Event { return s.events }
func (s *memSession) Activity() engine.Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.act
}
func (s *memSession) Interrupt(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy && s.intr != nil {
		select {
		case <-s.intr:
		default:
			close(s.intr)
		}
	}
	return nil
}

// interrupted is the turn's interrupt channel.
func (s *memSession) interrupted() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intr
}

// turnCtx ends when the session closes or the turn is interrupted.
func (s *memSession) turnCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	intr := s.interrupted()
	go func() {
		select {
		case <-s.closed:
		case <-intr:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}
func (s *memSession) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *memSession) Close(context.Context) error {
	s.once.Do(func() {
		close(s.closed)
		s.e.mu.Lock()
		s.e.live--
		s.e.mu.Unlock()
	})
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.evClosed {
		close(s.events)
		s.evClosed = true
	}
	return nil
}

func (s *memSession) Send(ctx context.Context, in engine.Input) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy {
		return errors.New("busy")
	}
	s.busy = true
	s.intr = make(chan struct{})
	s.e.mu.Lock()
	s.e.inputs = append(s.e.inputs, in)
	s.e.mu.Unlock()
	s.wg.Go(func() { s.play(in) })
	return nil
}

func (s *memSession) emit(ev engine.Event) bool {
	s.mu.Lock()
	if ev.Kind == engine.EventOutput {
		s.act.Count++
		s.act.At = time.Now()
	}
	if ev.Kind == engine.EventTurnEnd {
		s.busy = false
	}
	s.mu.Unlock()
	select {
	case s.events <- ev:
		return true
	case <-s.closed:
		return false
	}
}

func (s *memSession) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closed:
		return false
	case <-s.interrupted():
		return false
	}
}

// endInterrupted ends turn with "interrupted" if it was; it reports whether.
func (s *memSession) endInterrupted(turn troupe.TurnID) bool {
	select {
	case <-s.interrupted():
		s.emit(engine.Event{Kind: engine.EventTurnEnd, Turn: turn, Error: "interrupted"})
		return true
	default:
		return false
	}
}

func (s *memSession) play(in engine.Input) {
	text := in.Messages[0].Text
	end := func(out string) { s.emit(engine.Event{Kind: engine.EventTurnEnd, Turn: in.Turn, Text: out}) }
	f := strings.Fields(text)
	switch {
	case len(f) == 2 && f[0] == "big":
		n, _ := strconv.Atoi(f[1])
		end(strings.Repeat("é", n/2))
	case len(f) >= 2 && f[0] == "answer":
		end(strings.TrimPrefix(text, "answer "))
	case len(f) >= 2 && f[0] == "fail":
		s.emit(engine.Event{Kind: engine.EventTurnEnd, Turn: in.Turn, Error: strings.TrimPrefix(text, "fail ")})
	case len(f) >= 6 && f[0] == "work":
		dur, _ := time.ParseDuration(f[1])
		step, _ := time.ParseDuration(f[3])
		chunk := f[4] == "chunk"
		for t := time.Duration(0); t < dur; t += step {
			if !s.wait(step) {
				s.endInterrupted(in.Turn)
				return
			}
			out := "working\n"
			if chunk {
				out = "."
			}
			if !s.emit(engine.Event{Kind: engine.EventOutput, Turn: in.Turn, Text: out}) {
				return
			}
		}
		if then := text[strings.Index(text, " then ")+6:]; then != "hang" {
			end(then)
		} else {
			<-s.closed
		}
	case len(f) >= 4 && f[0] == "blocked":
		dur, _ := time.ParseDuration(f[1])
		if !s.emit(engine.Event{Kind: engine.EventBlocked, Turn: in.Turn, Text: "a dialog troupe does not know"}) {
			return
		}
		if !s.wait(dur) {
			s.endInterrupted(in.Turn)
			return
		}
		if s.emit(engine.Event{Kind: engine.EventBlocked, Turn: in.Turn}) {
			end(text[strings.Index(text, " then ")+6:])
		}
	case len(f) >= 6 && f[0] == "running":
		dur, _ := time.ParseDuration(f[1])
		limit, _ := time.ParseDuration(f[3])
		use := &engine.ToolUse{ID: "call-1", Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`), Limit: limit}
		if !s.emit(engine.Event{Kind: engine.EventToolCall, Turn: in.Turn, Tool: use}) {
			return
		}
		if !s.wait(dur) {
			s.endInterrupted(in.Turn)
			return
		}
		if s.emit(engine.Event{Kind: engine.EventToolResult, Turn: in.Turn, Tool: &engine.ToolUse{ID: "call-1", Name: "Bash", Output: "ok"}}) {
			end(text[strings.Index(text, " then ")+6:])
		}
	case len(f) >= 6 && f[0] == "limited":
		n, _ := strconv.Atoi(f[3])
		s.e.mu.Lock()
		if s.e.limited == nil {
			s.e.limited = map[string]int{}
		}
		s.e.limited[text]++
		hit := s.e.limited[text] <= n
		s.e.mu.Unlock()
		if !hit {
			end(text[strings.Index(text, " then ")+6:])
			return
		}
		var until time.Time
		if f[1] != "none" {
			d, _ := time.ParseDuration(f[1])
			until = time.Now().Add(d)
		}
		s.emit(engine.Event{Kind: engine.EventTurnEnd, Turn: in.Turn, Error: "usage limit reached", Limit: &engine.Limit{Until: until}})
	case len(f) >= 4 && f[0] == "silent":
		dur, _ := time.ParseDuration(f[1])
		if s.wait(dur) {
			end(text[strings.Index(text, " then ")+6:])
		} else {
			s.endInterrupted(in.Turn)
		}
	case len(f) == 2 && f[0] == "rich":
		big := json.RawMessage(`{"command":"` + strings.Repeat("x", 5000) + `"}`)
		var decided []string
		for _, ev := range []engine.Event{
			{Kind: engine.EventSession, SessionID: f[1]},
			{Kind: engine.EventOutput, Text: "hello "},
			{Kind: engine.EventOutput, Text: "wor"},
			{Kind: engine.EventOutput, Text: "ld"},
			{Kind: engine.EventThinking, Text: "let me see\nwhat to do"},
			{Kind: engine.EventToolCall, Tool: &engine.ToolUse{ID: "c1", Name: "Bash", Input: big}},
			{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: "c1", Output: "ok", IsError: true}},
			{Kind: engine.EventUsage, Usage: &engine.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.25}},
		} {
			ev.Turn = in.Turn
			if !s.emit(ev) {
				return
			}
		}
		ctx, cancel := s.turnCtx()
		defer cancel()
		for _, tool := range []string{"Read", "Bash"} {
			p := engine.Permission{ID: "p-" + tool, Turn: in.Turn, Tool: tool, Input: json.RawMessage(`{}`)}
			d, err := s.spec.Approver.Approve(ctx, p)
			if err != nil {
				d = engine.Decision{Reason: err.Error()}
			}
			decided = append(decided, fmt.Sprintf("%s:%v", tool, d.Allow))
			if !s.emit(engine.Event{Kind: engine.EventPermission, Turn: in.Turn, Permission: &p, Decision: &d}) {
				return
			}
		}
		end(strings.Join(decided, " "))
	case len(f) >= 2 && f[0] == "perm":
		ctx, cancel := s.turnCtx()
		defer cancel()
		var decided []string
		for i, tool := range f[1:] {
			p := engine.Permission{ID: fmt.Sprint("p", i), Turn: in.Turn, Tool: tool, Title: "use " + tool,
				Input: json.RawMessage(`{"command":"ls"}`)}
			d, err := s.spec.Approver.Approve(ctx, p)
			if err != nil {
				d = engine.Decision{Reason: err.Error()}
			}
			s.e.mu.Lock()
			s.e.decisions = append(s.e.decisions, d)
			s.e.mu.Unlock()
			out := fmt.Sprintf("%s:%v", tool, d.Allow)
			if !d.Allow {
				out += "(" + d.Reason + ")"
			}
			decided = append(decided, out)
			if !s.emit(engine.Event{Kind: engine.EventPermission, Turn: in.Turn, Permission: &p, Decision: &d}) {
				return
			}
		}
		if !s.endInterrupted(in.Turn) {
			end(strings.Join(decided, " "))
		}
	case len(f) == 2 && f[0] == "session":
		if s.emit(engine.Event{Kind: engine.EventSession, Turn: in.Turn, SessionID: f[1]}) {
			end("ok")
		}
	case text == "die":
		s.mu.Lock()
		s.err = errors.New("exit status 3: crashed on purpose")
		s.evClosed = true
		s.mu.Unlock()
		close(s.events)
	case len(f) >= 2 && f[0] == "tool":
		args := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(text, "tool"), " "+f[1]))
		out, err := s.spec.Tools.Call(context.Background(), f[1], json.RawMessage(args))
		if err != nil {
			out = "tool error: " + err.Error()
		}
		end(out)
	default:
		var parts []string
		for _, m := range in.Messages {
			parts = append(parts, "echo: "+m.Text)
		}
		end(strings.Join(parts, "\n"))
	}
}

// staticTeams is a fixed set of projects for tests.
type staticTeams map[troupe.ProjectID][]troupe.AgentSpec

func (t staticTeams) Agent(k troupe.RuntimeKey) (troupe.AgentSpec, string, bool) {
	for _, a := range t[k.Project] {
		if a.Name == k.Agent {
			return a, "/nonexistent/" + string(k.Project), true
		}
	}
	return troupe.AgentSpec{}, "", false
}

func (t staticTeams) Agents(p troupe.ProjectID) []troupe.AgentSpec { return t[p] }

func spec(name string, window time.Duration) troupe.AgentSpec {
	return troupe.AgentSpec{Name: troupe.AgentID(name), Engine: troupe.EngineFake, Mode: troupe.ModeStructured, TurnTimeout: window}
}
