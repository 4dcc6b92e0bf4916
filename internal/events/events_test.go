package events

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

func seqs(evs []Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func TestSubscribeResumesWithoutGapOrDuplicate(t *testing.T) {
	h := New(Options{})
	k := troupe.RuntimeKey{Project: "p1", Agent: "a"}
	for range 5 {
		h.Publish(k, InboxExpired{})
	}
	back, sub, ok := h.Subscribe(3)
	defer sub.Close()
	if !ok {
		t.Fatal("resume from 3 should be ok")
	}
	if got := seqs(back); len(got) != 2 || got[0] != 4 || got[1] != 5 {
		t.Fatalf("backlog = %v, want [4 5]", got)
	}
	h.Publish(k, InboxExpired{Messages: 1})
	ev := <-sub.C()
	if ev.Seq != 6 || ev.Type != TypeInboxExpired || string(ev.Data) != `{"messages":1}` || ev.Project != "p1" {
		t.Fatalf("live event = %+v", ev)
	}
}

func TestSubscribeTooOldOrFromAnotherRunResets(t *testing.T) {
	h := New(Options{Backlog: 4})
	for range 20 {
		h.Publish(troupe.RuntimeKey{}, InboxExpired{})
	}
	back, sub, ok := h.Subscribe(2)
	sub.Close()
	if ok {
		t.Fatal("since=2 is older than the backlog: want reset")
	}
	if got := seqs(back); got[len(got)-1] != 20 || len(got) < 4 {
		t.Fatalf("reset backlog = %v, want the kept events ending at 20", got)
	}
	_, sub, ok = h.Subscribe(99)
	sub.Close()
	if ok {
		t.Fatal("since ahead of the hub (daemon restarted): want reset")
	}
	_, sub, ok = h.Subscribe(0)
	sub.Close()
	if !ok {
		t.Fatal("since=0 is a fresh client: no reset")
	}
}

func TestSlowSubscriberIsDroppedNotBlocking(t *testing.T) {
	h := New(Options{Buffer: 2})
	_, sub, _ := h.Subscribe(0)
	for range 10 { // must not block
		h.Publish(troupe.RuntimeKey{}, InboxExpired{})
	}
	n := 0
	for range sub.C() {
		n++
	}
	if n != 2 {
		t.Fatalf("received %d before drop, want 2 (the buffer)", n)
	}
	sub.Close() // closing a dropped subscription is harmless
	if h.Last() != 10 {
		t.Fatalf("Last = %d", h.Last())
	}
}

// bigPayload is a payload of any size, for the bounds.
type bigPayload struct {
	Text string `json:"text"`
}

func (bigPayload) EventType() Type { return "test.big" }

// C14: an event's data is bounded (a bigger payload becomes a stub that
// states the cut), and so is the backlog, in bytes as in events.
func TestC14_EventDataAndBacklogAreBounded(t *testing.T) {
	h := New(Options{Backlog: 1000, BacklogBytes: 64 << 10, MaxData: 1 << 10})
	k := troupe.RuntimeKey{Project: "p1"}
	_, sub, _ := h.Subscribe(0)
	defer sub.Close()
	big := strings.Repeat("x", 5000)
	h.Publish(k, bigPayload{Text: big})
	ev := <-sub.C()
	if string(ev.Data) != `{"cut":true,"size":5011}` || ev.Type != "test.big" {
		t.Errorf("an event past MaxData: %s %s; want a stub stating the cut", ev.Type, ev.Data)
	}
	small := strings.Repeat("y", 900)
	for range 500 {
		h.Publish(k, bigPayload{Text: small})
	}
	back, sub2, ok := h.Subscribe(0)
	defer sub2.Close()
	bytes := 0
	for _, e := range back {
		bytes += len(e.Data) + eventOverhead
		if len(e.Data) > 1<<10 {
			t.Fatalf("event %d holds %d bytes of data", e.Seq, len(e.Data))
		}
	}
	if bytes > 64<<10 || len(back) < 32 {
		t.Errorf("backlog: %d events, %d bytes; want at most 64 KB, and not emptied", len(back), bytes)
	}
	if !ok || back[len(back)-1].Seq != h.Last() {
		t.Errorf("the backlog lost its newest event: ok %v, last %d of %d", ok, back[len(back)-1].Seq, h.Last())
	}
	// A client behind the trimmed part is told to reset.
	if _, s, ok := h.Subscribe(2); ok {
		t.Error("resuming from a trimmed event should reset")
	} else {
		s.Close()
	}
}
