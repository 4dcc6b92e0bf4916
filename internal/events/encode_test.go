package events

import (
	"encoding/json"
	"fmt"
	"github.com/troupe-dev/troupe/internal/journal"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// The hub encodes an event once, however many subscribers it has, and each
// of them gets the very same bytes.
func TestEventIsEncodedOnceForAllSubscribers(t *testing.T) {
	h := New(Options{})
	var encodes atomic.Int64
	h.onEncode = func() { encodes.Add(1) }
	var subs []*Subscription
	for range 10 {
		_, s, _ := h.Subscribe(0)
		defer s.Close()
		subs = append(subs, s)
	}
	for i := range 3 {
		h.Publish(troupe.RuntimeKey{Project: "p", Agent: "a"}, AgentActivity{Turn: "t1", Event: journal.Event{Kind: journal.KindOutput, Text: fmt.Sprint("line ", i)}})
	}
	if n := encodes.Load(); n != 3 {
		t.Fatalf("%d encodes for 3 events and 10 subscribers, want 3", n)
	}
	for i := range 3 {
		first := <-subs[0].C()
		for _, s := range subs[1:] {
			ev := <-s.C()
			if string(ev.SSE()) != string(first.SSE()) || &ev.SSE()[0] != &first.SSE()[0] {
				t.Fatalf("event %d: a subscriber got its own frame %q, want the shared %q", i, ev.SSE(), first.SSE())
			}
		}
	}
	back, s, _ := h.Subscribe(0) // a resuming client gets the same frames too
	s.Close()
	if len(back) != 3 || encodes.Load() != 3 {
		t.Fatalf("resume: %d events, %d encodes", len(back), encodes.Load())
	}
}

// The frame is what the SSE writer sent before it was shared: the id, the
// type, and the event as json.Marshal encodes it; Data is the frame's.
func TestSSEFrameIsTheEventAsJSON(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	h := New(Options{Now: func() time.Time { return now }})
	_, sub, _ := h.Subscribe(0)
	defer sub.Close()
	for _, c := range []struct {
		key troupe.RuntimeKey
		p   Payload
	}{
		{troupe.RuntimeKey{}, DaemonStarted{Addr: "127.0.0.1:1"}},
		{troupe.RuntimeKey{Project: "p<1>"}, ProjectRemoved{Project: "p<1>"}},
		{troupe.RuntimeKey{Project: "p", Agent: "a&b"}, AgentActivity{Turn: "t3", Event: journal.Event{Kind: journal.KindOutput, Text: "<b>\"é\"\n\u2028"}}},
		{troupe.RuntimeKey{Project: "p\"q\\", Agent: "é\u2028\x7f\x01"}, InboxExpired{Messages: 2}},
		{troupe.RuntimeKey{Project: "p", Agent: "a"}, bigPayload{Text: strings.Repeat("x", 9000)}},
	} {
		h.Publish(c.key, c.p)
		ev := <-sub.C()
		b, _ := json.Marshal(ev)
		want := fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b)
		if got := string(ev.SSE()); got != want {
			t.Errorf("frame\n%q\nwant\n%q", got, want)
		}
		if got := string(Event{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Project: ev.Project, Agent: ev.Agent, Data: ev.Data}.SSE()); got != want {
			t.Errorf("an event made elsewhere: frame\n%q\nwant\n%q", got, want)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil || back.Seq != ev.Seq || string(back.Data) != string(ev.Data) {
			t.Errorf("decode %s: %+v, %v", b, back, err)
		}
	}
	if got := string(Event{Seq: 9, Type: "x"}.SSE()); got != "id: 9\nevent: x\ndata: {\"seq\":9,\"time\":\"0001-01-01T00:00:00Z\",\"type\":\"x\"}\n\n" {
		t.Errorf("an event without data: %q", got)
	}
}
