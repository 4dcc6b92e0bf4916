package claudesessions

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/troupe-dev/troupe/internal/claudefmt"
	"os"
	"path/filepath"
	"testing"
)

// seedLines adds every line of the fixture transcripts (and a few hostile
// ones) to f's corpus.
func seedLines(f *testing.F) {
	files, _ := filepath.Glob("testdata/transcripts/*/*/*.jsonl")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for l := range bytes.SplitSeq(b, []byte{'\n'}) {
			if len(l) < 4096 {
				f.Add(l)
			}
		}
	}
	for _, s := range []string{``, `{`, `}`, `{}`, `{"type":"user"}`, `{"x\"type":"user"}`, `{"a":{"type":"assistant"},"type":"user"}`,
		`{"type" : "ai-title" , "aiTitle": 3}`, `{"type":"user","message":{"content":[{"type":"tool_result"}]}}`, "{\"type\":\"user\\\\\"}",
		`{"timestamp":"2026-11-29T18:19:41.233Z","type":"queue-operation"}`} {
		f.Add([]byte(s))
	}
}

// FuzzScanLine: the cheap scan never panics; on a valid JSON object whose
// top-level type is a known line type it agrees with encoding/json; a
// valid JSON object is never Bad.
func FuzzScanLine(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		l := claudefmt.ScanLine(b)
		_, _ = claudefmt.ParseHead(b)
		_, _ = claudefmt.ParseTitle(b)
		_, _ = Render(b)
		var top map[string]json.RawMessage
		if json.Unmarshal(b, &top) != nil {
			return
		}
		if l.Bad {
			t.Fatalf("valid JSON object scanned as bad: %q", b)
		}
		var typ string
		if json.Unmarshal(top["type"], &typ) != nil {
			return
		}
		if k, ok := claudefmt.KindOf(typ); ok && l.Kind != k {
			t.Fatalf("type %q scanned as kind %d, want %d: %q", typ, l.Kind, k, b)
		}
	})
}

// FuzzParseRegistryFile: never panics; what it accepts names a positive
// pid and a session.
func FuzzParseRegistryFile(f *testing.F) {
	files, _ := filepath.Glob("testdata/registry/example_*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	tl, _ := filepath.Glob("testdata/registry/timeline_*.jsonl")
	for _, p := range tl {
		fh, err := os.Open(p)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Content != "" {
				f.Add([]byte(ev.Content))
			}
		}
		fh.Close()
	}
	f.Add([]byte(`{"pid":-1,"sessionId":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := claudefmt.ParseRegistryFile(b)
		if err == nil && (r.PID <= 0 || r.SessionID == "") {
			t.Fatalf("accepted %q as %+v", b, r)
		}
	})
}

// FuzzProcStartTime: never panics; an accepted start time is digits.
func FuzzProcStartTime(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("1 (a) b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ProcStartTime(b)
		if err != nil {
			return
		}
		for _, c := range s {
			if c < '0' || c > '9' {
				t.Fatalf("start time %q from %q", s, b)
			}
		}
	})
}

// Escaped letters cannot hide a line's type from the scan.
func TestScanLineEscapedLetters(t *testing.T) {
	for _, s := range []string{`{"typ\u0065":"user"}`, `{"type":"us\u0065r"}`, `{"typ\u0065":"user","a":{"type":"assistant"}}`} {
		if l := claudefmt.ScanLine([]byte(s)); l.Kind != claudefmt.KindUser {
			t.Errorf("%s: kind %d, want user", s, l.Kind)
		}
	}
}
