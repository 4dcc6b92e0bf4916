package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// A terminal-mode agent on a runner: the person attaches on the daemon's
// machine (troupe attach, the web UI) to the terminal on the runner.
//
//   - The daemon's session is an engine.TerminalSession whose Terminal is
//     a proxy (remoteTerm). Its Attach asks the runner (opAttach) to attach
//     a viewer to the hosted session's terminal; the answer carries the
//     screen's snapshot and size. Type, Resize and Detach are requests.
//   - The runner's pump (runnerView) publishes the viewer's output on
//     bus.FromRunner(name)+".term.<viewer>", numbered from 1 (a gap
//     closes the daemon's viewer with a reason rather than showing a
//     corrupt screen), and at its end a last message with the reason.
//   - Flow control: the runner has at most window bytes sent that the
//     daemon's viewer has not handed on; the daemon's viewer publishes the
//     bytes its reader took (opCredit, cumulative, so a lost credit is made
//     good by the next) as its reader takes them, and every creditEvery
//     anyway, which also says it is alive. A slow reader (a slow browser)
//     so slows the runner's sends; the runner's terminal then queues up to
//     its own bound (term's viewer queue) and cuts the viewer there, "fell
//     behind", as for a local viewer. The daemon holds at most window +
//     termChunk bytes per viewer; a runner sending past that is cut.
//   - A runner that goes unreachable closes the daemon's viewers of its
//     sessions with that reason; a viewer whose daemon has not been heard
//     from for viewerLease is detached on the runner.

// Bounds of an attachment over the link.
const (
	// termWindow is the bytes a runner may have sent to a viewer that the
	// daemon's reader has not taken.
	termWindow = 256 << 10
	// termChunk bounds one message of output: the chunks the runner's
	// terminal has ready are joined up to it.
	termChunk = 64 << 10
	// maxSnapshot bounds a screen's snapshot in the attach answer (JSON
	// carries bytes as base64).
	maxSnapshot = (MaxPayload - 64<<10) / 4 * 3
	// creditEvery is how often a daemon's viewer says it is alive, with its
	// credit, when its reader takes nothing.
	creditEvery = 5 * time.Second
	// viewerLease is how long a runner keeps a viewer whose daemon side
	// it has not heard from.
	viewerLease = 4 * creditEvery
	// stallCheck is how often a runner's viewer waiting for credit looks
	// whether its terminal cut it meanwhile.
	stallCheck = time.Second
	// termWait bounds a request about a viewer.
	termWait = 10 * time.Second
)

// NATS headers of a viewer's output messages.
const (
	hdrSeq = "Troupe-Seq"
	hdrEnd = "Troupe-End" // the last message: its data is the reason
)

type attachReq struct {
	Session string `json:"session"`
	Viewer  string `json:"viewer"`
	Window  int64  `json:"window"`
}

type attachReply struct {
	Snapshot []byte `json:"snapshot"`
	Cols     int    `json:"cols"`
	Rows     int    `json:"rows"`
}

// viewerReq is a request about one attached viewer: keys, a resize, its
// detach.
type viewerReq struct {
	Viewer string `json:"viewer"`
	Keys   []byte `json:"keys,omitempty"`
	Cols   int    `json:"cols,omitempty"`
	Rows   int    `json:"rows,omitempty"`
}

type sizeReply struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// creditMsg is a daemon's viewer's credit: the bytes its reader took in
// all.
type creditMsg struct {
	Viewer   string `json:"viewer"`
	Consumed int64  `json:"consumed"`
}

// termSubject is where runner name publishes viewer's output.
func termSubject(name, viewer string) string {
	return bus.FromRunner(name) + "." + opTerm + "." + viewer
}

// isTerminal says whether agent a runs a terminal the person can attach to.
func isTerminal(a troupe.AgentSpec) bool {
	return a.Mode == troupe.ModeTerminal || a.Engine == troupe.EngineTerminal
}

// ---- the daemon's side ----

// Terminal is the terminal of a terminal-mode agent's session on its
// runner; nil for an agent of another mode.
func (s *session) Terminal() engine.Terminal {
	if s.term == nil {
		return nil
	}
	return s.term
}

// remoteTerm is the daemon's proxy of a session's terminal on its runner.
type remoteTerm struct {
	s      *session
	window int64

	mu         sync.Mutex
	viewers    map[*remoteViewer]struct{}
	cols, rows int // as the runner last said
}

func newRemoteTerm(s *session) *remoteTerm {
	return &remoteTerm{s: s, window: termWindow, viewers: map[*remoteViewer]struct{}{}}
}

// Attach attaches a viewer to the terminal on the runner: the screen now
// (in the answer), then its output as it comes.
func (t *remoteTerm) Attach() (engine.TerminalViewer, error) {
	s := t.s
	d := s.d
	if err := d.Reachable(s.runner); err != nil {
		return nil, err
	}
	v := &remoteViewer{t: t, id: newID(), more: make(chan struct{}, 1), stop: make(chan struct{}),
		out: make(chan []byte), fwdDone: make(chan struct{})}
	sub, err := d.o.Conn.Subscribe(termSubject(s.runner, v.id), v.receive)
	if err != nil {
		return nil, fmt.Errorf("attach to the terminal on runner %s: %w", s.runner, err)
	}
	v.sub = sub
	ctx, cancel := context.WithTimeout(s.Context(), termWait)
	defer cancel()
	data, err := d.request(ctx, s.runner, opAttach, attachReq{Session: s.id, Viewer: v.id, Window: t.window})
	var rep attachReply
	if err == nil {
		err = json.Unmarshal(data, &rep)
	}
	if err != nil {
		_ = sub.Unsubscribe()
		if errors.Is(err, errNotConnected) {
			return nil, d.unreachable(s.runner)
		}
		return nil, fmt.Errorf("attach to the terminal on runner %s: %w", s.runner, err)
	}
	v.snapshot = rep.Snapshot
	t.mu.Lock()
	t.cols, t.rows = rep.Cols, rep.Rows
	t.viewers[v] = struct{}{}
	t.mu.Unlock()
	go v.forward()
	return v, nil
}

// Size is the terminal's size as the runner last said it (at an attach
// or a resize); before any, it asks.
func (t *remoteTerm) Size() (cols, rows int) {
	t.mu.Lock()
	cols, rows = t.cols, t.rows
	t.mu.Unlock()
	if cols > 0 {
		return cols, rows
	}
	ctx, cancel := context.WithTimeout(t.s.Context(), termWait)
	defer cancel()
	var rep sizeReply
	if data, err := t.s.d.request(ctx, t.s.runner, opTermSize, attachReq{Session: t.s.id}); err == nil && json.Unmarshal(data, &rep) == nil {
		t.setSize(rep.Cols, rep.Rows)
	}
	return rep.Cols, rep.Rows
}

func (t *remoteTerm) setSize(cols, rows int) {
	t.mu.Lock()
	t.cols, t.rows = cols, rows
	t.mu.Unlock()
}

// InUse reports whether a person is attached through this daemon: the
// runner's viewers of the session are this daemon's, so the count here
// is the runner's without a request (the runtime asks on its idle timer).
func (t *remoteTerm) InUse() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.viewers) > 0
}

// closeAll closes every viewer at once with reason (the runner is
// unreachable, the session ended).
func (t *remoteTerm) closeAll(reason string) {
	t.mu.Lock()
	vs := make([]*remoteViewer, 0, len(t.viewers))
	for v := range t.viewers {
		vs = append(vs, v)
	}
	t.mu.Unlock()
	for _, v := range vs {
		v.cut(reason, true)
	}
}

// remoteViewer is one person attached through this daemon to a terminal
// on a runner. It owns one goroutine, forward, which hands the output to
// the reader and returns the credit; it ends when the viewer is closed
// or detached (Detach waits for it).
type remoteViewer struct {
	t        *remoteTerm
	id       string
	sub      *nats.Subscription
	snapshot []byte

	mu       sync.Mutex
	seq      uint64   // the last output message taken
	queue    [][]byte // output not yet handed on
	queued   int64    // its bytes
	ended    bool     // the runner's last message came: hand on the queue, then close
	cutOff   bool     // closed at once: the queue is dropped
	gone     bool     // the runner's side is gone (ended, unreachable): Detach asks nothing
	reason   string
	maxQueue int64 // the most bytes queued at once (tests)

	more     chan struct{} // 1-buffered: the queue or the state changed
	stop     chan struct{} // closed by Detach
	stopOnce sync.Once
	out      chan []byte // unbuffered: a receive is the reader taking a chunk
	fwdDone  chan struct{}
	doneOnce sync.Once
}

func (v *remoteViewer) Snapshot() []byte      { return v.snapshot }
func (v *remoteViewer) Output() <-chan []byte { return v.out }

func (v *remoteViewer) Reason() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reason
}

// receive takes one message of the runner's output, in the bus's order.
func (v *remoteViewer) receive(m *nats.Msg) {
	seq, _ := strconv.ParseUint(m.Header.Get(hdrSeq), 10, 64)
	runner := v.t.s.runner
	v.mu.Lock()
	if v.ended || v.cutOff {
		v.mu.Unlock()
		return
	}
	if seq != v.seq+1 {
		v.mu.Unlock()
		v.cut(fmt.Sprintf("the terminal's output from runner %s came out of sequence (message %d where %d was due: some were lost on the way): detached, attach again", runner, seq, v.seq+1), false)
		return
	}
	v.seq = seq
	if m.Header.Get(hdrEnd) != "" {
		v.ended, v.gone, v.reason = true, true, string(m.Data)
		v.mu.Unlock()
		v.t.forget(v)
		v.signal()
		return
	}
	if v.queued+int64(len(m.Data)) > v.t.window+termChunk {
		v.mu.Unlock()
		v.cut(fmt.Sprintf("runner %s sent its terminal's output past the window of %d bytes: detached", runner, v.t.window), false)
		return
	}
	v.queue = append(v.queue, m.Data)
	v.queued += int64(len(m.Data))
	v.maxQueue = max(v.maxQueue, v.queued)
	v.mu.Unlock()
	v.signal()
}

func (v *remoteViewer) signal() {
	select {
	case v.more <- struct{}{}:
	default:
	}
}

// cut closes the viewer at once with reason, its queue dropped; gone
// says the runner's side is gone too.
func (v *remoteViewer) cut(reason string, gone bool) {
	v.mu.Lock()
	if v.ended || v.cutOff {
		v.mu.Unlock()
		return
	}
	v.cutOff, v.reason, v.queue, v.queued = true, reason, nil, 0
	v.gone = v.gone || gone
	v.mu.Unlock()
	v.t.forget(v)
	v.signal()
}

func (t *remoteTerm) forget(v *remoteViewer) {
	t.mu.Lock()
	delete(t.viewers, v)
	t.mu.Unlock()
}

// pop takes the next chunk; with none, it says whether the viewer is
// over.
func (v *remoteViewer) pop() (c []byte, over bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cutOff {
		return nil, true
	}
	if len(v.queue) == 0 {
		return nil, v.ended
	}
	c = v.queue[0]
	v.queue[0] = nil
	v.queue = v.queue[1:]
	v.queued -= int64(len(c))
	return c, false
}

// forward hands the output to the reader, one chunk at a time, and
// returns the credit as the reader takes it; Output closes when it
// returns.
func (v *remoteViewer) forward() {
	defer close(v.fwdDone)
	defer close(v.out)
	defer v.doneOnce.Do(func() { _ = v.sub.Unsubscribe() })
	tick := time.NewTicker(creditEvery)
	defer tick.Stop()
	var consumed, credited int64
	var cur []byte
	for {
		if cur == nil {
			var over bool
			if cur, over = v.pop(); over {
				return
			}
		}
		var out chan []byte
		if cur != nil {
			out = v.out
		}
		select {
		case out <- cur:
			consumed += int64(len(cur))
			cur = nil
			// The credit goes back in steps of a quarter window, and
			// whenever the reader caught up.
			if consumed-credited >= v.t.window/4 || v.empty() {
				v.credit(consumed)
				credited = consumed
			}
		case <-v.more:
		case <-tick.C:
			v.credit(consumed)
			credited = consumed
		case <-v.stop:
			return
		}
	}
}

func (v *remoteViewer) empty() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.queue) == 0
}

// credit tells the runner the bytes the reader took, and that the viewer
// lives.
func (v *remoteViewer) credit(consumed int64) {
	b, _ := json.Marshal(creditMsg{Viewer: v.id, Consumed: consumed})
	if err := v.t.s.d.o.Conn.Publish(bus.ToRunner(v.t.s.runner)+"."+opCredit, b); err != nil {
		v.t.s.d.log.Debug("credit a terminal viewer", "runner", v.t.s.runner, "err", err)
	}
}

func (v *remoteViewer) closed() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ended || v.cutOff {
		return fmt.Errorf("detached from the terminal: %s", v.reason)
	}
	return nil
}

// Type sends the person's keys to the terminal on the runner.
func (v *remoteViewer) Type(ctx context.Context, keys []byte) error {
	if err := v.closed(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, termWait)
	defer cancel()
	_, err := v.t.s.d.request(ctx, v.t.s.runner, opType, viewerReq{Viewer: v.id, Keys: keys})
	return err
}

// Resize resizes the terminal on the runner to the person's.
func (v *remoteViewer) Resize(cols, rows int) error {
	if err := v.closed(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(v.t.s.Context(), termWait)
	defer cancel()
	data, err := v.t.s.d.request(ctx, v.t.s.runner, opResize, viewerReq{Viewer: v.id, Cols: cols, Rows: rows})
	if err != nil {
		return err
	}
	var rep sizeReply
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("decode resize answer: %w", err)
	}
	v.t.setSize(rep.Cols, rep.Rows)
	return nil
}

// Detach detaches the viewer here and on the runner (unless the runner's
// side is gone already); the program goes on.
func (v *remoteViewer) Detach() {
	v.stopOnce.Do(func() { close(v.stop) })
	<-v.fwdDone
	v.t.forget(v)
	v.mu.Lock()
	gone := v.gone
	if !v.ended && !v.cutOff {
		v.cutOff = true
	}
	v.mu.Unlock()
	if gone {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	if _, err := v.t.s.d.request(ctx, v.t.s.runner, opDetach, viewerReq{Viewer: v.id}); err != nil {
		// The runner's lease detaches it (viewerLease).
		v.t.s.d.log.Debug("detach a terminal viewer on its runner", "runner", v.t.s.runner, "err", err)
	}
}

// ---- the runner's side ----

// termViews are a runner's attached viewers, by the viewer's id (each
// knows its session).
type termViews struct {
	mu sync.Mutex
	m  map[string]*runnerView
}

func (tv *termViews) get(id string) *runnerView {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	return tv.m[id]
}

// runnerView is one of the daemon's viewers of a hosted session's
// terminal, on the runner: its pump publishes the output within the
// daemon's credit.
type runnerView struct {
	id, session string
	v           engine.TerminalViewer
	window      int64

	mu    sync.Mutex
	acked int64     // the bytes the daemon's reader took, in all
	heard time.Time // the daemon's last credit
	wake  chan struct{}
	stop  chan struct{} // closed by the daemon's detach
	once  sync.Once
}

func newRunnerView(id, session string, v engine.TerminalViewer, window int64) *runnerView {
	if window <= 0 || window > termWindow {
		window = termWindow
	}
	return &runnerView{id: id, session: session, v: v, window: max(window, termChunk),
		heard: time.Now(), wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// credit takes a credit of the daemon's viewer.
func (rv *runnerView) credit(consumed int64) {
	rv.mu.Lock()
	rv.acked = max(rv.acked, consumed)
	rv.heard = time.Now()
	rv.mu.Unlock()
	select {
	case rv.wake <- struct{}{}:
	default:
	}
}

func (rv *runnerView) detach() { rv.once.Do(func() { close(rv.stop) }) }

// lapsed says why the daemon's viewer is taken for gone (not heard from
// for viewerLease); "" while it lives.
func (rv *runnerView) lapsed() string {
	rv.mu.Lock()
	heard := rv.heard
	rv.mu.Unlock()
	if time.Since(heard) > viewerLease {
		return fmt.Sprintf("the daemon's viewer was not heard from for %s: detached", viewerLease)
	}
	return ""
}

// stalled says why a pump waiting for credit must stop: the daemon's
// viewer lapsed, or the terminal cut the viewer meanwhile (what it still
// holds for it is dropped: the reason goes at once); "" to wait on.
func (rv *runnerView) stalled() string {
	if reason := rv.lapsed(); reason != "" {
		return reason
	}
	return rv.v.Reason()
}

// pump publishes the viewer's output in order, within the daemon's
// credit, then its end with the reason (send's end ""), until the viewer
// ends, the daemon detaches it, the lease runs out or ctx ends. It
// detaches the terminal's viewer as it returns.
func (rv *runnerView) pump(ctx context.Context, send func(seq uint64, data []byte, end string) error) {
	defer rv.v.Detach()
	var seq uint64
	var sent int64
	finish := func(reason string) {
		seq++
		_ = send(seq, []byte(reason), "end")
	}
	tick := time.NewTicker(stallCheck)
	defer tick.Stop()
	for {
		var c []byte
		select {
		case b, ok := <-rv.v.Output():
			if !ok {
				reason := rv.v.Reason()
				if reason == "" {
					reason = "detached"
				}
				finish(reason)
				return
			}
			c = b
		case <-tick.C:
			// The viewer's own end comes through Output, after the
			// output before it.
			if reason := rv.lapsed(); reason != "" {
				finish(reason)
				return
			}
			continue
		case <-rv.wake:
			continue
		case <-rv.stop:
			return
		case <-ctx.Done():
			finish("the runner stopped")
			return
		}
		// Join what else is ready, up to a message's bound.
	join:
		for len(c) < termChunk {
			select {
			case b, ok := <-rv.v.Output():
				if !ok {
					break join // the end is seen at the next receive
				}
				c = append(c[:len(c):len(c)], b...)
			default:
				break join
			}
		}
		// Wait for room in the window.
		for {
			rv.mu.Lock()
			room := sent-rv.acked < rv.window
			rv.mu.Unlock()
			if room {
				break
			}
			select {
			case <-rv.wake:
			case <-tick.C:
				if reason := rv.stalled(); reason != "" {
					finish(reason)
					return
				}
			case <-rv.stop:
				return
			case <-ctx.Done():
				finish("the runner stopped")
				return
			}
		}
		seq++
		if err := send(seq, c, ""); err != nil {
			finish("send the terminal's output: " + err.Error())
			return
		}
		sent += int64(len(c))
	}
}

// termOp answers the daemon's requests about viewers: attach, type,
// resize, detach, size.
func (r *Runner) termOp(ctx context.Context, op string, data []byte) (any, error) {
	if op == opAttach || op == opTermSize {
		var req attachReq
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, fmt.Errorf("decode %s: %w", op, err)
		}
		t, err := r.terminal(req.Session)
		if err != nil {
			return nil, err
		}
		if op == opTermSize {
			cols, rows := t.Size()
			return sizeReply{Cols: cols, Rows: rows}, nil
		}
		return r.attach(ctx, t, req)
	}
	var req viewerReq
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("decode %s: %w", op, err)
	}
	rv := r.terms.get(req.Viewer)
	if rv == nil {
		if op == opDetach {
			return nil, nil // gone already
		}
		return nil, fmt.Errorf("no terminal viewer %q on runner %s (it was detached)", req.Viewer, r.o.Name)
	}
	switch op {
	case opType:
		return nil, rv.v.Type(ctx, req.Keys)
	case opResize:
		if err := rv.v.Resize(req.Cols, req.Rows); err != nil {
			return nil, err
		}
		t, err := r.terminal(rv.session)
		if err != nil {
			return nil, err
		}
		cols, rows := t.Size()
		return sizeReply{Cols: cols, Rows: rows}, nil
	default:
		rv.detach()
		return nil, nil
	}
}

// terminal is the terminal of hosted session id.
func (r *Runner) terminal(id string) (engine.Terminal, error) {
	r.mu.Lock()
	h := r.sessions[id]
	r.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("no session %q on runner %s", id, r.o.Name)
	}
	ts, ok := h.sess.(engine.TerminalSession)
	if !ok || ts.Terminal() == nil {
		return nil, fmt.Errorf("agent %s's session on runner %s has no terminal", h.key.Agent, r.o.Name)
	}
	return ts.Terminal(), nil
}

// attach attaches a viewer of the daemon's and starts its pump.
func (r *Runner) attach(ctx context.Context, t engine.Terminal, req attachReq) (attachReply, error) {
	if !safeName.MatchString(req.Viewer) {
		return attachReply{}, fmt.Errorf("attach: %q is no viewer id", req.Viewer)
	}
	v, err := t.Attach()
	if err != nil {
		return attachReply{}, fmt.Errorf("attach to the terminal: %w", err)
	}
	snap := v.Snapshot()
	if len(snap) > maxSnapshot {
		v.Detach()
		return attachReply{}, fmt.Errorf("the screen's snapshot is %d bytes, more than the link carries (%d): make the terminal smaller", len(snap), maxSnapshot)
	}
	rv := newRunnerView(req.Viewer, req.Session, v, req.Window)
	r.terms.mu.Lock()
	if r.terms.m == nil {
		r.terms.m = map[string]*runnerView{}
	}
	if _, dup := r.terms.m[rv.id]; dup {
		r.terms.mu.Unlock()
		v.Detach()
		return attachReply{}, fmt.Errorf("attach: viewer %s is attached already", rv.id)
	}
	r.terms.m[rv.id] = rv
	r.terms.mu.Unlock()
	subject := termSubject(r.o.Name, rv.id)
	send := func(seq uint64, data []byte, end string) error {
		m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{hdrSeq: []string{strconv.FormatUint(seq, 10)}}}
		if end != "" {
			m.Header.Set(hdrEnd, "1")
		}
		return r.o.Conn.PublishMsg(m)
	}
	cols, rows := t.Size()
	r.wg.Go(func() {
		rv.pump(r.ctx, send)
		r.terms.mu.Lock()
		delete(r.terms.m, rv.id)
		r.terms.mu.Unlock()
	})
	return attachReply{Snapshot: snap, Cols: cols, Rows: rows}, nil
}

// credit takes a daemon's viewer's credit (published: no answer).
func (r *Runner) credit(data []byte) {
	var c creditMsg
	if json.Unmarshal(data, &c) != nil {
		return
	}
	if rv := r.terms.get(c.Viewer); rv != nil {
		rv.credit(c.Consumed)
	}
}
