package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// scripted is an http.RoundTripper that answers from a list, in order,
// and records when each request came: no real I/O, so it runs in a
// synctest bubble.
type scripted struct {
	mu      sync.Mutex
	answers []*http.Response
	at      []time.Time
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	a := s.answers[0]
	s.answers = s.answers[1:]
	a.Request = r
	return a, nil
}

func answer(status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader(body))}
}

type countSink struct{ chunks, out int }

func (c *countSink) chunk()          { c.chunks++ }
func (c *countSink) output(string)   { c.out++ }
func (c *countSink) thinking(string) {}

const okStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fine\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// TestRetryBackoffOnFakeTime: 429 and 5xx are tried again after a doubling
// wait (0.5 s, 1 s, 2 s, …, at most 10 s), a server's Retry-After wins when
// longer (at most 30 s), each retry is reported; the tries are bounded.
func TestRetryBackoffOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Options{})
		rt := &scripted{answers: []*http.Response{
			answer(429, nil, `{"error":{"message":"slow down"}}`),
			answer(503, nil, "overloaded"),
			answer(429, http.Header{"Retry-After": {"7"}}, `{"error":{"message":"slow down"}}`),
			answer(500, nil, "boom"),
			answer(200, http.Header{"Content-Type": {"text/event-stream"}}, okStream),
		}}
		c := &client{http: &http.Client{Transport: rt}, url: "http://model.test/v1/chat/completions", retries: e.retries,
			backoff: func(n int) time.Duration { return min(e.retryBase<<min(n, 20), maxBackoff) }}
		var retries []int
		sink := &countSink{}
		start := time.Now()
		st, err := c.post(context.Background(), []byte("{}"), sink, func(n int, _ error) { retries = append(retries, n) })
		if err != nil || st.text != "fine" {
			t.Fatalf("post = %+v, %v", st, err)
		}
		var gaps []time.Duration
		for i := 1; i < len(rt.at); i++ {
			gaps = append(gaps, rt.at[i].Sub(rt.at[i-1]))
		}
		want := []time.Duration{500 * time.Millisecond, time.Second, 7 * time.Second, 4 * time.Second}
		if len(gaps) != len(want) {
			t.Fatalf("gaps %v, want %v", gaps, want)
		}
		for i := range want {
			if gaps[i] != want[i] {
				t.Errorf("wait %d = %v, want %v (all: %v)", i, gaps[i], want[i], gaps)
			}
		}
		if len(retries) != 4 || time.Since(start) != 12500*time.Millisecond {
			t.Errorf("retries %v after %v", retries, time.Since(start))
		}

		// Bounded: the sixth refusal in a row ends it, with the server's words.
		rt.answers = nil
		for range 6 {
			rt.answers = append(rt.answers, answer(502, nil, `{"error":{"message":"bad gateway"}}`))
		}
		_, err = c.post(context.Background(), []byte("{}"), sink, func(int, error) {})
		if err == nil || !strings.Contains(err.Error(), "bad gateway") || !strings.Contains(err.Error(), "gave up after 6 tries") {
			t.Errorf("err = %v", err)
		}

		// Cancelled while it waits: it returns at once.
		rt.answers = []*http.Response{answer(429, http.Header{"Retry-After": {"30"}}, "")}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		before := time.Now()
		if _, err := c.post(ctx, []byte("{}"), sink, func(int, error) {}); err == nil || time.Since(before) != time.Second {
			t.Errorf("cancelled wait: %v after %v", err, time.Since(before))
		}
	})
}

// FuzzStream: whatever a server streams, the reader never panics and never
// keeps more than its bounds.
func FuzzStream(f *testing.F) {
	for _, s := range []string{okStream, "", "data: [DONE]\n", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3}]}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"x\",\"arguments\":\"{\"}}]}}]}\n\ndata: {\"choices\":[{\"finish_reason\":\"tool_calls\"}]}\n\n",
		"data: {\"error\":{\"message\":\"nope\"}}\n\n", "data: not json\n\n", ": comment\nevent: x\ndata: {}\n\n", "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := &client{}
		st, _ := c.stream(bytes.NewReader(body), &countSink{})
		if len(st.text) > maxStepText || len(st.calls) > maxCalls {
			t.Fatalf("kept %d bytes of text, %d calls", len(st.text), len(st.calls))
		}
	})
}
