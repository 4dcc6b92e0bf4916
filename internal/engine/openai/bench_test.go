package openai

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/store/sqlite"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// stepsPerTurn is the length of the benchmark's turns: tool-call steps,
// then a text answer.
const stepsPerTurn = 20

// instantModel answers every request at once with a canned stream: a
// call of list_agents, or (every stepsPerTurn-th request) a text that
// ends the turn. It reads the body and nothing more: what a step costs
// beyond it is troupe's.
func instantModel(b *testing.B) string {
	var n atomic.Int64
	callAnswer := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"list_agents\",\"arguments\":\"\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":24}}\n\n" +
		"data: [DONE]\n\n")
	textAnswer := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n")
	bufs := sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := bufs.Get().(*[]byte)
		io.CopyBuffer(io.Discard, struct{ io.Reader }{r.Body}, *buf) // the server's own garbage stays out of the figure
		bufs.Put(buf)
		w.Header().Set("Content-Type", "text/event-stream")
		if n.Add(1)%stepsPerTurn == 0 {
			w.Write(textAnswer)
		} else {
			w.Write(callAnswer)
		}
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// BenchmarkLoopStep is troupe's overhead per step of the agent loop with a
// model that answers at once over loopback HTTP: from one tool call to the
// next, the request built (system, tools, the conversation so far, within
// the default budget of 32k tokens: the oldest turns dropped as it grows),
// sent and its stream parsed, the call run (a troupe tool that
// answers at once), the step stored (in memory, or SQLite with fsync), the
// events emitted. p50 and p99 over all steps.
func BenchmarkLoopStep(b *testing.B) {
	for _, store := range []string{"mem", "sqlite"} {
		b.Run("store="+store, func(b *testing.B) {
			var st Store = NewMemStore()
			if store == "sqlite" {
				db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "troupe.db"), sqlite.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				st = db.Chats()
			}
			eng := New(Options{Store: st})
			spec := engine.StartSpec{Key: testKeyOf, Dir: b.TempDir(), Tools: &testTools{}, Instructions: "You are a benchmark.",
				Agent: troupe.AgentSpec{Name: "x", Engine: troupe.EngineOpenAI, Model: "m", Mode: troupe.ModeStructured,
					Options: map[string]any{optBaseURL: instantModel(b)}}} // the default context budget: old turns dropped as they pass it
			s, err := eng.Start(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close(context.Background()) })
			<-s.Events() // the conversation id
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for t := 0; len(ds) < b.N; t++ {
				id := troupe.TurnID(fmt.Sprintf("t%d", t))
				in := engine.Input{Turn: id, Messages: []troupe.Message{{Project: "p1", To: "x", From: troupe.Person, Kind: troupe.KindMessage, Text: "go"}}}
				if err := s.Send(context.Background(), in); err != nil {
					b.Fatal(err)
				}
				var last time.Time
				for ev := range s.Events() {
					if ev.Kind == engine.EventToolCall {
						now := time.Now()
						if !last.IsZero() && len(ds) < b.N {
							ds = append(ds, now.Sub(last))
						}
						last = now
					}
					if ev.Kind == engine.EventTurnEnd {
						if ev.Error != "" {
							b.Fatalf("turn %s: %s", id, ev.Error)
						}
						break
					}
				}
			}
			b.StopTimer()
			slices.Sort(ds)
			q := func(f float64) float64 { return float64(ds[int(f*float64(len(ds)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
		})
	}
}
