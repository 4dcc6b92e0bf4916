package fakemodel

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestPaceChunks(t *testing.T) {
	for _, tc := range []struct {
		text string
		p    Pace
		want []string
	}{
		{"hello", Pace{}, []string{"hello"}},
		{"abcdefg", Pace{Total: 3 * time.Second, Every: time.Second}, []string{"a", "bc", "de", "fg"}},
		{"hé", Pace{Total: time.Second, Every: 250 * time.Millisecond}, []string{"h", "é", ".", ".", "."}},
		{"", Pace{Total: time.Second, Every: time.Second}, []string{".", "."}},
	} {
		got := tc.p.chunks(tc.text)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q %+v: got %q, want %q", tc.text, tc.p, got, tc.want)
		}
	}
}

// pipeListener serves HTTP over net.Pipe, so a synctest bubble can hold the
// whole exchange (real sockets block outside the bubble's view).
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.closeOnce.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestSlowStreamPacing runs a slow answer on the bubble's fake clock: the
// text deltas go out at 0, 500ms, …, 3s, and [[silent:]] holds the stream
// after message_start.
func TestSlowStreamPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{})
		ln := newPipeListener()
		hs := &http.Server{Handler: s}
		go hs.Serve(ln)
		tr := &http.Transport{DialContext: ln.dial}
		defer func() {
			tr.CloseIdleConnections()
			s.Close()
			hs.Close()
		}()
		client := &http.Client{Transport: tr}
		body := strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"[[silent:10s]][[slow:3s every 500ms]][[text:abcdefg]]"}]}`)
		start := time.Now()
		resp, err := client.Post("http://fake/v1/messages", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var at []time.Duration
		var text string
		evs, err := readSSE(resp.Body, func(e sseEvent) {
			if e.name == "content_block_delta" {
				at = append(at, time.Since(start))
				text += str(obj(e.data["delta"])["text"])
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []time.Duration
		for i := range 7 {
			want = append(want, 10*time.Second+time.Duration(i)*500*time.Millisecond)
		}
		if text != "abcdefg" || len(at) != len(want) || names(evs) == "" {
			t.Fatalf("text %q at %v", text, at)
		}
		for i := range at {
			if at[i] != want[i] {
				t.Errorf("delta %d at %v, want %v", i, at[i], want[i])
			}
		}
	})
}
