package fakemodel

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// A [[limit:…]] refuses every request naming it until the limit resets,
// then lets them through; another limit is its own.
func TestLimitResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, err := ParseMarkers("go [[limit:30s]] [[text:ok]]")
		if err != nil || r.Limit == nil || r.Limit.Reset != 30*time.Second || r.Limit.Quiet || r.Text != "ok" {
			t.Fatalf("ParseMarkers: %+v, %v", r, err)
		}
		s := New(Options{})
		if left, ok := s.limit(*r.Limit); !ok || left != 30*time.Second {
			t.Fatalf("first request: %v, %v", left, ok)
		}
		time.Sleep(10 * time.Second)
		if left, ok := s.limit(*r.Limit); !ok || left != 20*time.Second {
			t.Errorf("10 s later: %v, %v; want 20s left", left, ok)
		}
		if _, ok := s.limit(Limit{Key: "30s quiet", Reset: 30 * time.Second}); !ok {
			t.Error("another limit is not its own")
		}
		time.Sleep(20 * time.Second)
		if _, ok := s.limit(*r.Limit); ok {
			t.Error("still limited after the reset")
		}
	})
	if r, _, err := ParseMarkers("[[limit:5s quiet]]"); err != nil || r.Limit == nil || !r.Limit.Quiet {
		t.Errorf("quiet: %+v, %v", r, err)
	}
	if _, _, err := ParseMarkers("[[limit:soon]]"); err == nil {
		t.Error("[[limit:soon]] accepted")
	}
}

// The 429 of each provider: retry-after and its reset headers, or none
// when quiet.
func TestWriteLimit(t *testing.T) {
	for _, c := range []struct {
		api    API
		quiet  bool
		header string
		typ    string
	}{
		{Messages, false, "anthropic-ratelimit-unified-reset", "rate_limit_error"},
		{Responses, false, "x-ratelimit-reset-requests", "requests"},
		{ChatCompletions, true, "", "requests"},
		{Messages, true, "", "rate_limit_error"},
	} {
		w := httptest.NewRecorder()
		writeLimit(w, c.api, 1500*time.Millisecond, c.quiet)
		var body struct {
			Error struct{ Type string } `json:"error"`
		}
		json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != 429 || body.Error.Type != c.typ {
			t.Errorf("%s quiet %v: %d %s", c.api, c.quiet, w.Code, w.Body)
		}
		if got := w.Header().Get("retry-after"); c.quiet != (got == "") || !c.quiet && got != "2" {
			t.Errorf("%s quiet %v: retry-after %q", c.api, c.quiet, got)
		}
		if c.header != "" && w.Header().Get(c.header) == "" {
			t.Errorf("%s: no %s", c.api, c.header)
		}
	}
}
