package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// gatedWriter is a streaming ResponseWriter that counts writes and
// flushes, and can hold a write until it is let go.
type gatedWriter struct {
	hdr     http.Header
	entered chan struct{} // a write began (when gate is set)

	mu      sync.Mutex // guards the fields below
	gate    chan struct{}
	body    bytes.Buffer
	writes  int
	flushes int
}

func (w *gatedWriter) Header() http.Header { return w.hdr }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	gate := w.gate
	w.gate = nil
	w.mu.Unlock()
	if gate != nil {
		w.entered <- struct{}{}
		<-gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.body.Write(p)
}
func (w *gatedWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes++
}

func (w *gatedWriter) counts() (writes, flushes int, body string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.flushes, w.body.String()
}

// hold makes the next write wait, once it began (w.entered), until the
// returned channel is closed.
func (w *gatedWriter) hold() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gate = make(chan struct{})
	return w.gate
}

// stream serves GET /api/events?since= on f with a gatedWriter and waits
// for its first flush (it has subscribed by then); done is closed when the
// handler returns.
func stream(ctx context.Context, t *testing.T, f *fixture, since uint64) (w *gatedWriter, done chan struct{}) {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, "GET", "http://"+f.addr+"/api/events?since="+strconv.FormatUint(since, 10), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	w = &gatedWriter{hdr: http.Header{}, entered: make(chan struct{})}
	done = make(chan struct{})
	go func() { f.srv.ServeHTTP(w, req); close(done) }()
	for {
		if _, fl, _ := w.counts(); fl > 0 {
			return w, done
		}
		select {
		case <-done:
			t.Fatal("the stream ended")
		case <-time.After(time.Millisecond):
		}
	}
}

// Events that queue while a stream is writing go out together: one write
// and one flush for the batch, not one per event, in order, with the
// frames the hub encoded.
func TestSSEWritesQueuedEventsInOneBatch(t *testing.T) {
	f := newFixture(t)
	key := troupe.RuntimeKey{Project: "p", Agent: "a"}
	f.hub.Publish(key, events.InboxExpired{}) // before the stream: not sent
	_, sub, _ := f.hub.Subscribe(1)           // to know the frames
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	w, done := stream(ctx, t, f, 1)
	gate := w.hold()
	f.hub.Publish(key, events.InboxExpired{Messages: 1})
	<-w.entered // the stream is writing event 2; 99 more queue meanwhile
	for i := range 99 {
		f.hub.Publish(key, events.InboxExpired{Messages: i + 2})
	}
	close(gate)
	var want bytes.Buffer
	for range 100 {
		want.Write((<-sub.C()).SSE())
	}
	for {
		if _, _, body := w.counts(); len(body) >= want.Len() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	writes, flushes, body := w.counts()
	if body != want.String() {
		t.Fatalf("stream body differs from the hub's frames:\n%q\nwant\n%q", body, want.String())
	}
	// The subscription's flush, then event 2 alone, then 3..101 at once.
	if writes != 2 || flushes != 3 {
		t.Errorf("100 events took %d writes and %d flushes, want 2 and 3 (1 of them for the headers)", writes, flushes)
	}
}

// A stream that falls behind gets what was queued for it, then ends; the
// client resumes with its last id and gets the rest from the backlog.
func TestSSESlowStreamIsCutOffAndResumes(t *testing.T) {
	f := newFixtureHub(t, api.Options{}, events.Options{Buffer: 2})
	key := troupe.RuntimeKey{Project: "p"}
	w, done := stream(context.Background(), t, f, 0)
	gate := w.hold()
	f.hub.Publish(key, events.InboxExpired{})
	<-w.entered // the stream writes event 1; 2 and 3 fill its buffer, 4 cuts it off
	for range 9 {
		f.hub.Publish(key, events.InboxExpired{})
	}
	close(gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow stream was not ended")
	}
	var last uint64
	_, _, body := w.counts()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			if n != last+1 {
				t.Fatalf("the slow stream sent %d after %d", n, last)
			}
			last = n
		}
	}
	if last != 3 {
		t.Fatalf("the slow stream sent events up to %d, want 3 (1, then its buffer of 2)", last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []uint64
	_, err := client.New(f.ts.URL, token).Events(ctx, last, func() { t.Error("unexpected reset") }, func(ev events.Event) error {
		got = append(got, ev.Seq)
		if ev.Seq == 10 {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) || len(got) != 7 || got[0] != 4 {
		t.Fatalf("resume since %d: %v, %v; want 4..10", last, got, err)
	}
}
