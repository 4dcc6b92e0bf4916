package fakemodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// start serves a fresh Server on httptest; the Server closes first so held
// handlers end before the httptest server waits for them.
func start(t *testing.T, o Options) (*Server, string) {
	t.Helper()
	s := New(o)
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts.URL
}

func post(t *testing.T, url string, body any, header ...string) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type sseEvent struct {
	name string
	data map[string]any
	raw  string
}

// readSSE parses an SSE body, calling each (if given) as an event arrives;
// it returns the events read before any error.
func readSSE(r io.Reader, each ...func(sseEvent)) ([]sseEvent, error) {
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.raw != "" {
				evs = append(evs, cur)
				for _, fn := range each {
					fn(cur)
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.raw = line[len("data: "):]
			if cur.raw != "[DONE]" {
				if err := json.Unmarshal([]byte(cur.raw), &cur.data); err != nil {
					return evs, err
				}
			}
		}
	}
	return evs, sc.Err()
}

func mustSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	evs, err := readSSE(resp.Body)
	if err != nil {
		t.Fatalf("read SSE: %v", err)
	}
	return evs
}

func names(evs []sseEvent) string {
	var n []string
	for _, e := range evs {
		n = append(n, e.name)
	}
	return strings.Join(n, " ")
}

func decode(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("decode %d body: %v", resp.StatusCode, err)
	}
	return m
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOtherEndpoints(t *testing.T) {
	s, url := start(t, Options{})
	req, _ := http.NewRequest(http.MethodHead, url+"/api/hello", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD /api/hello: %v %v", resp, err)
	}
	resp, err = http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, resp); len(arr(m["data"])) != 1 {
		t.Errorf("models: %v", m)
	}
	resp = post(t, url+"/v1/messages/count_tokens", map[string]any{"messages": []any{}})
	if m := decode(t, resp); m["input_tokens"] == nil {
		t.Errorf("count_tokens: %v", m)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Method != "HEAD" || reqs[0].API != "" || reqs[2].API != CountTokens || reqs[2].Seq != 3 {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestHostileBodies(t *testing.T) {
	_, url := start(t, Options{MaxBody: 64})
	for _, tc := range []struct {
		path, body string
		status     int
		errPath    string // where the message sits in the error body
	}{
		{"/v1/messages", `{"messages":`, 400, "error.message"},
		{"/v1/messages", `[1,2]`, 400, "error.message"},
		{"/v1/messages", `null`, 400, "error.message"},
		{"/v1/responses", `{`, 400, "error.message"},
		{"/v1/chat/completions", `{"messages":"` + strings.Repeat("x", 100) + `"}`, 413, "error.message"},
		{"/v1/messages", `{"messages":"` + strings.Repeat("x", 100) + `"}`, 413, "error.message"},
	} {
		resp, err := http.Post(url+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, resp)
		resp.Body.Close()
		if resp.StatusCode != tc.status || str(obj(m["error"])["message"]) == "" {
			t.Errorf("%s %q: status %d, body %v; want %d with a message", tc.path, tc.body, resp.StatusCode, m, tc.status)
		}
	}
}

func TestCloseDoesNotHangOnWaitingHandlers(t *testing.T) {
	s := New(Options{})
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{}) // never closed
	s.Push(Reply{Hold: hold})
	errs := make(chan error, 3)
	for _, prompt := range []string{"[[sleep:1h]]", "[[silent:1h]]", "held"} {
		go func() {
			body, _ := json.Marshal(map[string]any{"stream": true, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
			resp, err := http.Post(s.URL()+"/v1/messages", "application/json", bytes.NewReader(body))
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	if _, err := s.WaitRequests(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-errs // each client ends: an error or a cut body
	}
	if _, err := s.WaitRequests(context.Background(), 4); err == nil {
		t.Error("WaitRequests after Close: want an error")
	}
}

func TestWaitRequestsContext(t *testing.T) {
	s, _ := start(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.WaitRequests(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// chatPost sends one non-streaming chat request whose user message is text.
func chatPost(t *testing.T, url, text string) {
	t.Helper()
	resp := post(t, url+"/v1/chat/completions", chatBody(false, nil, map[string]any{"role": "user", "content": text}))
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("chat %q: %d", text, resp.StatusCode)
	}
}

// TestTheRecordKeepsTheNewestRequests: past KeepRequests the oldest
// requests are dropped and counted; Seq still counts them all, and
// WaitRequests waits on every request recorded, dropped or not.
func TestTheRecordKeepsTheNewestRequests(t *testing.T) {
	s, url := start(t, Options{KeepRequests: 3})
	for i := range 5 {
		chatPost(t, url, fmt.Sprint("prompt ", i+1))
	}
	reqs, err := s.WaitRequests(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range reqs {
		got = append(got, fmt.Sprint(q.Seq, ":", q.Prompt))
	}
	if strings.Join(got, ",") != "3:prompt 3,4:prompt 4,5:prompt 5" || s.Dropped() != 2 {
		t.Errorf("kept %v, dropped %d; want the newest 3 (seq 3 to 5), 2 dropped", got, s.Dropped())
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("Requests: %d, want 3", n)
	}
}

// TestTheRecordKeepsWithinItsBytes: past KeepBytes the oldest requests are
// dropped; the newest is kept even when it alone is bigger.
func TestTheRecordKeepsWithinItsBytes(t *testing.T) {
	const bound = 64 << 10
	s, url := start(t, Options{KeepBytes: bound})
	big := strings.Repeat("x", 8<<10) // some 24 KB a request: body, prompt, the echo
	for i := range 10 {
		chatPost(t, url, fmt.Sprint(i, big))
	}
	reqs := s.Requests()
	s.mu.Lock()
	kept := s.kept
	s.mu.Unlock()
	if len(reqs) < 2 || len(reqs)+s.Dropped() != 10 || reqs[len(reqs)-1].Seq != 10 || reqs[0].Seq != 10-len(reqs)+1 || kept > bound {
		t.Errorf("kept %d requests (%d bytes), dropped %d; want the newest few within %d bytes, the rest dropped", len(reqs), kept, s.Dropped(), bound)
	}
	huge := strings.Repeat("y", 100<<10)
	chatPost(t, url, huge)
	if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Prompt != huge || s.Dropped() != 10 {
		t.Errorf("after a request bigger than the bound: kept %d (dropped %d); want it alone", len(reqs), s.Dropped())
	}
}

// TestStartListensOnLoopbackOnly: an address beyond loopback is refused
// (nothing listens), unless AllowRemote; loopback names are fine.
func TestStartListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		s := New(Options{})
		err := s.Start(addr)
		if !errors.Is(err, ErrNotLoopback) || s.URL() != "" {
			t.Errorf("Start(%q) = %v, listening at %q; want ErrNotLoopback, not listening", addr, err, s.URL())
		}
		s.Close()
	}
	for _, addr := range []string{"", "127.0.0.1:0", "localhost:0"} {
		s := New(Options{})
		if err := s.Start(addr); err != nil {
			t.Errorf("Start(%q): %v", addr, err)
		}
		s.Close()
	}
	s := New(Options{AllowRemote: true})
	if err := s.Start("0.0.0.0:0"); err != nil {
		t.Fatalf("Start(0.0.0.0:0) with AllowRemote: %v", err)
	}
	defer s.Close()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /v1/models: %d", resp.StatusCode)
	}
}
