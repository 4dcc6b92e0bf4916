// Package events is the daemon's numbered event feed: every state change the
// person may watch (projects, teams, agents, later messages and tasks) is
// published here and streamed to clients over SSE by internal/api.
//
// Events carry a sequence number that increases by one per event, so a client
// that loses its connection resumes with the last number it saw. The hub keeps
// a bounded backlog in memory; a client that asks for events older than the
// backlog, or from a previous daemon run, is told to reset and re-read state.
// Durable delivery of messages never goes through this feed: it is for
// watching, the store is for keeping.
//
// Hub is safe for concurrent use; one mutex guards its backlog and
// subscribers. Slow-consumer policy: each subscription has a bounded buffer;
// a subscriber that lets it fill is dropped (its channel closed) and must
// resume with ?since=N. Publish never blocks. Any package may import events.
package events

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Event is one numbered entry of the feed.
type Event struct {
	Seq     uint64           `json:"seq"`
	Time    time.Time        `json:"time"`
	Type    Type             `json:"type"`
	Project troupe.ProjectID `json:"project,omitempty"`
	Agent   troupe.AgentID   `json:"agent,omitempty"`
	Data    json.RawMessage  `json:"data,omitempty"`
}

// Options configures a Hub. Zero values mean defaults.
type Options struct {
	Backlog int              // events kept for resumption; default 4096
	Buffer  int              // per-subscriber buffer; default 1024
	Now     func() time.Time // clock; default time.Now
}

// Hub numbers events and fans them out to subscribers.
type Hub struct {
	now    func() time.Time
	buffer int

	// mu guards everything below.
	mu      sync.Mutex
	next    uint64  // seq of the next event; starts at 1
	backlog []Event // the last size to 2*size events, oldest first
	size    int
	subs    map[*Subscription]struct{}
}

// New returns an empty hub.
func New(o Options) *Hub {
	if o.Backlog <= 0 {
		o.Backlog = 4096
	}
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Hub{now: o.Now, buffer: o.Buffer, next: 1, size: o.Backlog, subs: map[*Subscription]struct{}{}}
}

// Publish appends an event with p's type and data (marshalled to JSON),
// about key (zero for the daemon, Agent empty for a project), and returns
// its sequence number. It never blocks.
func (h *Hub) Publish(key troupe.RuntimeKey, p Payload) uint64 {
	typ, raw := p.EventType(), marshal(p)
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := Event{Seq: h.next, Time: h.now().UTC(), Type: typ, Project: key.Project, Agent: key.Agent, Data: raw}
	h.next++
	h.backlog = append(h.backlog, ev)
	if len(h.backlog) >= 2*h.size { // trim in batches: amortized O(1) per event
		h.backlog = append([]Event(nil), h.backlog[len(h.backlog)-h.size:]...)
	}
	for s := range h.subs {
		select {
		case s.c <- ev:
		default:
			delete(h.subs, s)
			close(s.c)
		}
	}
	return ev.Seq
}

// Last returns the sequence number of the newest event, 0 when none.
func (h *Hub) Last() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1
}

// Subscription receives events published after it was made.
type Subscription struct {
	h *Hub
	c chan Event
}

// C returns the channel of events. It is closed when the subscriber fell
// behind or called Close.
func (s *Subscription) C() <-chan Event { return s.c }

// Close stops the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.h.subs[s]; ok {
		delete(s.h.subs, s)
		close(s.c)
	}
}

// Subscribe returns the backlog after since and a subscription for what
// follows, with no gap and no duplicate between them. ok is false when the
// events after since are no longer all in the backlog (or since is ahead of
// this hub, as after a daemon restart): the caller should reset its state;
// backlog then holds every event still kept.
func (h *Hub) Subscribe(since uint64) (backlog []Event, sub *Subscription, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok = true
	last := h.next - 1
	if since > last {
		ok, since = false, 0
	}
	if since > 0 && len(h.backlog) > 0 && since+1 < h.backlog[0].Seq {
		ok, since = false, 0
	}
	for _, ev := range h.backlog {
		if ev.Seq > since {
			backlog = append(backlog, ev)
		}
	}
	sub = &Subscription{h: h, c: make(chan Event, h.buffer)}
	h.subs[sub] = struct{}{}
	return backlog, sub, ok
}
