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
// The backlog is bounded in events (Options.Backlog) and in bytes
// (Options.BacklogBytes), and each event's data in bytes (Options.MaxData):
// a bigger payload is replaced by a stub that states the cut,
// {"cut":true,"size":N} (contract C14; the texts are in the store).
//
// Each event is encoded once, when it is published, into its SSE frame
// (Event.SSE): every subscriber and every resuming client is handed the same
// bytes, so the cost of encoding does not grow with the subscribers. The
// event's Data is a slice of that frame, so the frame costs little memory
// beside it.
//
// Hub is safe for concurrent use; one mutex guards its backlog and
// subscribers. Slow-consumer policy: each subscription has a bounded buffer;
// a subscriber that lets it fill is dropped (its channel closed) and must
// resume with ?since=N. Publish never blocks. Any package may import events.
package events

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Event is one numbered entry of the feed. An event the hub hands out
// shares its Data and its SSE frame with every other receiver: neither may
// be modified.
type Event struct {
	Seq     uint64           `json:"seq"`
	Time    time.Time        `json:"time"`
	Type    Type             `json:"type"`
	Project troupe.ProjectID `json:"project,omitempty"`
	Agent   troupe.AgentID   `json:"agent,omitempty"`
	Data    json.RawMessage  `json:"data,omitempty"`

	frame []byte // the SSE frame, encoded once by the hub; nil for an event made elsewhere
}

// SSE returns the event as one Server-Sent Events frame:
// "id: SEQ\nevent: TYPE\ndata: JSON\n\n", JSON being the event itself. For
// an event of a hub, the frame was encoded when it was published and is
// shared: the caller must not modify it. For any other event it is encoded
// now.
func (e Event) SSE() []byte {
	if e.frame != nil {
		return e.frame
	}
	encode(&e)
	return e.frame
}

// encode sets e.frame to e's SSE frame, and e.Data to the slice of the
// frame that holds it. The JSON is what json.Marshal(e) gives — the fields
// in order, Project, Agent and Data omitted when empty — with the data as
// it is (the hub's data comes from json.Marshal, so it is already compact
// and escaped). The fields are appended by hand: this runs on every
// Publish.
func encode(e *Event) {
	b := make([]byte, 0, len(e.Data)+2*len(e.Type)+len(e.Project)+len(e.Agent)+128)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, e.Type...)
	b = append(b, "\ndata: {\"seq\":"...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"time":`...)
	if t, err := e.Time.AppendText(append(b, '"')); err == nil { // RFC 3339, as MarshalJSON
		b = append(t, '"')
	} else { // a year out of JSON's range; the hub's clock never gives one
		b = append(b, `null`...)
	}
	b = append(b, `,"type":`...)
	b = appendString(b, string(e.Type))
	if e.Project != "" {
		b = append(b, `,"project":`...)
		b = appendString(b, string(e.Project))
	}
	if e.Agent != "" {
		b = append(b, `,"agent":`...)
		b = appendString(b, string(e.Agent))
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		off := len(b)
		b = append(b, e.Data...)
		e.Data = b[off:len(b):len(b)]
	}
	b = append(b, "}\n\n"...)
	e.frame = b
}

// appendString appends s as encoding/json writes a string: as it is between
// quotes when it has nothing to escape (the ids and type names of the
// feed), else by json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Options configures a Hub. Zero values mean defaults.
type Options struct {
	Backlog      int              // events kept for resumption; default 4096
	BacklogBytes int              // bytes of encoded events (plus eventOverhead each) kept; default 8 MB
	MaxData      int              // bytes of one event's data; default 8 KB
	Buffer       int              // per-subscriber buffer; default 1024
	Now          func() time.Time // clock; default time.Now
}

// eventOverhead is what an event counts in the backlog's bytes beside its
// SSE frame (which holds its data): the Event struct.
const eventOverhead = 128

// cost is what e counts in the backlog's bytes.
func cost(e *Event) int { return len(e.frame) + eventOverhead }

// Cut is the data of an event whose payload was bigger than
// Options.MaxData: its type stays, its data says how big it was.
type Cut struct {
	Cut  bool `json:"cut"`  // always true
	Size int  `json:"size"` // bytes of the payload that was cut
}

// Hub numbers events and fans them out to subscribers.
type Hub struct {
	now      func() time.Time
	buffer   int
	maxData  int
	maxBytes int

	// mu guards everything below.
	mu      sync.Mutex
	next    uint64  // seq of the next event; starts at 1
	backlog []Event // the last size to 2*size events, oldest first
	bytes   int     // of the backlog: frames plus eventOverhead each
	size    int
	subs    map[*Subscription]struct{}

	onEncode func() // called for each encode; tests count them
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
	if o.MaxData <= 0 {
		o.MaxData = 8 << 10
	}
	if o.BacklogBytes <= 0 {
		o.BacklogBytes = 8 << 20
	}
	return &Hub{now: o.Now, buffer: o.Buffer, maxData: o.MaxData, maxBytes: o.BacklogBytes,
		next: 1, size: o.Backlog, subs: map[*Subscription]struct{}{}}
}

// Publish appends an event with p's type and data (marshalled to JSON),
// about key (zero for the daemon, Agent empty for a project), and returns
// its sequence number. It never blocks.
func (h *Hub) Publish(key troupe.RuntimeKey, p Payload) uint64 {
	typ, raw := p.EventType(), marshal(p)
	if len(raw) > h.maxData {
		raw, _ = json.Marshal(Cut{Cut: true, Size: len(raw)})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := Event{Seq: h.next, Time: h.now().UTC(), Type: typ, Project: key.Project, Agent: key.Agent, Data: raw}
	encode(&ev)
	if h.onEncode != nil {
		h.onEncode()
	}
	h.next++
	h.backlog = append(h.backlog, ev)
	h.bytes += cost(&ev)
	if len(h.backlog) >= 2*h.size || h.bytes > h.maxBytes {
		// Trim in batches, amortized O(1) per event: down to size events
		// and three quarters of the bytes.
		drop := max(0, len(h.backlog)-h.size)
		for i := range h.backlog[:drop] {
			h.bytes -= cost(&h.backlog[i])
		}
		for drop < len(h.backlog)-1 && h.bytes > h.maxBytes/4*3 {
			h.bytes -= cost(&h.backlog[drop])
			drop++
		}
		h.backlog = append([]Event(nil), h.backlog[drop:]...)
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
