package claudesessions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupe-dev/troupe/internal/claudefmt"
	"strings"
	"time"
)

// Entry is one transcript line as `troupe observe` shows it.
type Entry struct {
	Time time.Time `json:"time"`
	Role string    `json:"role"` // user, assistant, tool, tool_result, system
	Text string    `json:"text"`
}

// Chunk is a piece of a transcript read from an offset.
type Chunk struct {
	Entries []Entry
	Next    int64 // the offset to read from next
	Size    int64 // the file's size when read
	Skipped int   // lines not shown: not JSON, foreign, over the line cap
	Live    bool  // the session is live (at the end of the read)
}

// Follow limits.
const (
	MaxFollowRead  = 1 << 20 // bytes read per Follow call
	MaxEntryText   = 4 << 10 // an entry's text is cut there
	followInterval = 200 * time.Millisecond
)

// Follow reads session id's transcript from offset: complete lines only,
// at most MaxFollowRead bytes. When nothing new is there it waits up to
// wait for the file to grow or the session's liveness to change (checked
// every 200 ms) before answering empty. An offset past the end (the file
// was replaced) reads from 0.
func (m *Machine) Follow(ctx context.Context, id string, offset int64, wait time.Duration) (Chunk, error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return Chunk{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		c, err := readChunk(s.Path, offset, m.Index.o.MaxLine)
		if err != nil {
			return Chunk{}, err
		}
		_, c.Live = m.Live(id)
		// new lines, the session's liveness changed, or time is up
		if c.Next > offset || c.Live != s.Live || !time.Now().Before(deadline) {
			return c, nil
		}
		if c.Next < offset {
			offset = c.Next
		}
		t := time.NewTimer(followInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return c, nil
		case <-t.C:
		}
	}
}

func readChunk(path string, offset int64, maxLine int) (Chunk, error) {
	f, fi, err := openFile(path)
	if err != nil {
		return Chunk{}, fmt.Errorf("read transcript: %w", err)
	}
	defer f.Close()
	c := Chunk{Size: fi.Size(), Next: offset}
	if offset > fi.Size() {
		offset, c.Next = 0, 0
	}
	n := min(fi.Size()-offset, MaxFollowRead)
	if n <= 0 {
		return c, nil
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, offset)
	buf = buf[:got]
	if got == 0 && err != nil {
		return c, fmt.Errorf("read transcript: %w", err)
	}
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		if int64(len(buf)) >= int64(maxLine) || len(buf) == MaxFollowRead {
			// one line longer than a read: skip it whole
			c.Skipped++
			c.Next = offset + int64(len(buf))
		}
		return c, nil
	}
	for line := range bytes.SplitSeq(buf[:end], []byte{'\n'}) {
		if len(line) > maxLine {
			c.Skipped++
			continue
		}
		es, ok := Render(line)
		if !ok {
			c.Skipped++
			continue
		}
		c.Entries = append(c.Entries, es...)
	}
	c.Next = offset + int64(end) + 1
	return c, nil
}

// Render turns one transcript line into what a person follows: prompts,
// answers, tool calls and results, errors. Other known lines give no
// entry; ok is false for a line that is not a known JSON line.
func Render(b []byte) (_ []Entry, ok bool) {
	l := claudefmt.ScanLine(b)
	if l.Bad || l.Kind == claudefmt.KindUnknown {
		return nil, false
	}
	var v struct {
		Type      string          `json:"type"`
		Subtype   string          `json:"subtype"`
		Timestamp string          `json:"timestamp"`
		IsMeta    bool            `json:"isMeta"`
		Message   json.RawMessage `json:"message"`
		Content   json.RawMessage `json:"content"`
		AITitle   string          `json:"aiTitle"`
		Error     json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil, false
	}
	at := claudefmt.ParseTime(v.Timestamp)
	switch v.Type {
	case "user", "assistant":
		if v.IsMeta {
			return nil, true
		}
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(v.Message, &msg) != nil {
			return nil, true
		}
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			return []Entry{{Time: at, Role: v.Type, Text: cut(s, MaxEntryText)}}, true
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			Content json.RawMessage `json:"content"`
			IsError bool            `json:"is_error"`
		}
		if json.Unmarshal(msg.Content, &blocks) != nil {
			return nil, true
		}
		var out []Entry
		for _, bl := range blocks {
			switch bl.Type {
			case "text":
				out = append(out, Entry{Time: at, Role: v.Type, Text: cut(bl.Text, MaxEntryText)})
			case "tool_use":
				out = append(out, Entry{Time: at, Role: "tool", Text: cut(bl.Name+" "+string(bl.Input), MaxEntryText)})
			case "tool_result":
				t := resultText(bl.Content)
				if bl.IsError {
					t = "error: " + t
				}
				out = append(out, Entry{Time: at, Role: "tool_result", Text: cut(t, MaxEntryText)})
			}
		}
		return out, true
	case "system":
		if v.Subtype == "api_error" {
			return []Entry{{Time: at, Role: "system", Text: cut("API error: "+string(v.Error), MaxEntryText)}}, true
		}
	case "ai-title":
		return []Entry{{Time: at, Role: "system", Text: "title: " + cut(v.AITitle, MaxEntryText)}}, true
	}
	return nil, true
}

func resultText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(c)
}
