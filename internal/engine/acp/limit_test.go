package acp

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/jsonrpc"
)

// OpenCode's answer to a prompt it gave up on after its retries of HTTP
// 429 (testdata/opencode_limit.jsonl, captured from opencode acp 1.18.33
// on the fake model's [[limit:500s quiet]]) ends the turn with Limit set,
// Until zero: the message names no wait.
func TestTurnEndOpenCodeLimit(t *testing.T) {
	b, err := os.ReadFile("testdata/opencode_limit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := jsonrpc.Parse([]byte(strings.TrimSpace(string(b))))
	if err != nil || msg.Error == nil {
		t.Fatalf("parse: %v, %+v", err, msg)
	}
	var m mapper
	_, end := m.turnEnd(nil, msg.Error, false)
	if end.Limit == nil || !end.Limit.Until.IsZero() {
		t.Fatalf("turn end %+v, want a limit with no reset time", end)
	}
	if !strings.Contains(end.Error, "Rate limit reached for requests") {
		t.Errorf("error %q, want OpenCode's words", end.Error)
	}
	if _, end := m.turnEnd(nil, errors.New("Internal error: Bad Request"), false); end.Limit != nil {
		t.Errorf("another failure has a limit: %+v", end)
	}
	if _, end := m.turnEnd(nil, errors.New("rate limit reached"), true); end.Limit != nil {
		t.Errorf("an interrupted turn has a limit: %+v", end)
	}
}

// limitOf reads the wait an error names, bounded: a day at most; no limit
// in an error that does not say one.
func TestLimitOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		msg       string
		wantLimit bool
		wantWait  time.Duration // 0: Until zero
	}{
		{"Rate limit reached for requests. Please try again in 30s.", true, 30 * time.Second},
		{"Rate limit reached for gpt-x. Please try again in 1m30s.", true, 90 * time.Second},
		{"rate_limit_exceeded: please try again in 450ms", true, 450 * time.Millisecond},
		{"You have hit your usage limit.", true, 0},
		{"HTTP 429 Too Many Requests", true, 0},
		{"Rate limit reached. Please try again in 999999h.", true, engine.MaxLimitWait},
		{"Rate limit reached. Please try again in 99999999999999999999s.", true, 0},
		{"Rate limit reached. Please try again in 0s.", true, 0},
		{"Internal error: Bad Request", false, 0},
		{"read 429 bytes", false, 0},
		{strings.Repeat("x", maxErrorScan) + " rate limit", false, 0},
	}
	for _, tt := range tests {
		l := limitOf(tt.msg, now)
		if (l != nil) != tt.wantLimit {
			t.Errorf("limitOf(%.60q) = %+v, want a limit: %v", tt.msg, l, tt.wantLimit)
			continue
		}
		if l == nil {
			continue
		}
		want := time.Time{}
		if tt.wantWait > 0 {
			want = now.Add(tt.wantWait)
		}
		if !l.Until.Equal(want) {
			t.Errorf("limitOf(%.60q) until %v, want %v", tt.msg, l.Until, want)
		}
	}
}
