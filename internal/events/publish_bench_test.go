package events

import (
	"github.com/troupe-dev/troupe/internal/journal"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkPublish is the publisher's cost of one event of ~200 bytes of
// data with no subscriber: marshalling its payload, numbering it, encoding
// its SSE frame (once, for every later subscriber) and keeping it in the
// backlog.
func BenchmarkPublish(b *testing.B) {
	h := New(Options{})
	k := troupe.RuntimeKey{Project: "p1", Agent: "architect"}
	p := AgentActivity{Turn: "t1", Event: journal.Event{Kind: journal.KindOutput, Text: strings.Repeat("x", 180)}}
	for b.Loop() {
		h.Publish(k, p)
	}
}
