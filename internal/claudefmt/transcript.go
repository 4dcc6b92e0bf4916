package claudefmt

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Kind is a transcript line's top-level "type".
type Kind uint8

// The kinds of transcript lines the index tells apart. Every other known
// line type is KindOther; a line that is not a JSON object, or whose type
// is missing or unknown, is KindUnknown (foreign: counted, not an error).
const (
	KindUnknown Kind = iota
	KindUser
	KindAssistant
	KindAITitle
	KindCustomTitle
	KindSummary
	KindOther
)

// KindOf is the Kind of a line whose top-level type is typ; false for a
// type not known.
func KindOf(typ string) (Kind, bool) {
	k, ok := knownTypes[typ]
	return k, ok
}

// knownTypes maps the top-level line types seen in transcripts of the
// pinned CLI (docs/engines/claude-code.md, "Transcripts") and of older
// versions to their Kind.
var knownTypes = map[string]Kind{
	"user":                  KindUser,
	"assistant":             KindAssistant,
	"ai-title":              KindAITitle,
	"custom-title":          KindCustomTitle,
	"summary":               KindSummary,
	"system":                KindOther,
	"attachment":            KindOther,
	"queue-operation":       KindOther,
	"api-request":           KindOther,
	"api-request-blob":      KindOther,
	"api-request-shape":     KindOther,
	"last-prompt":           KindOther,
	"cost-state":            KindOther,
	"atis-latch":            KindOther,
	"tools-used":            KindOther,
	"file-history-snapshot": KindOther,
	"mode":                  KindOther,
	"permission-mode":       KindOther,
	"progress":              KindOther,
	"agent-name":            KindOther,
	"tag":                   KindOther,
	"pr-link":               KindOther,
}

// Line is what the cheap scan takes from one transcript line, without
// decoding it: its kind and, when present, its time and model. Bad says the
// line is not a JSON object (truncated or garbled: it neither starts with
// '{' nor ends with '}').
type Line struct {
	Kind      Kind
	Bad       bool
	Timestamp string // raw RFC 3339 text of the first "timestamp" key; "" if none
	Model     string // the first "model" key's value (assistant lines); "" if none
}

// ScanLine classifies one line (without its newline) cheaply: it finds the
// values of the "type" keys outside strings by substring search and keeps
// those that are known line types; one known type is the line's type, more
// than one (a nested object with a "type" that is also a line type) is
// settled by decoding the line's top level. It never fails: a line it
// cannot make sense of is Bad or KindUnknown.
func ScanLine(b []byte) Line {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return Line{Bad: true}
	}
	var l Line
	found := KindUnknown
	conflict := false
	for v := range stringValues(b, `"type"`) {
		k, ok := knownTypes[v]
		if !ok {
			continue
		}
		if found == KindUnknown {
			found = k
		} else if found != k {
			conflict = true
		}
	}
	// A letter written as a \u escape could hide a "type" key or a line
	// type from the scan (the CLI never writes one so): decode.
	if conflict || escapedLetter(b) {
		var top struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &top); err != nil {
			return Line{Bad: true}
		}
		found = knownTypes[top.Type]
	}
	l.Kind = found
	for v := range stringValues(b, `"timestamp"`) {
		l.Timestamp = v
		break
	}
	if l.Kind == KindAssistant {
		for v := range stringValues(b, `"model"`) {
			l.Model = v
			break
		}
	}
	return l
}

// stringValues yields the string values of key (with its quotes) in the
// JSON text b wherever it appears as a key: an unescaped quote, the name,
// a quote, optional space, a colon, optional space, a string without
// escapes. Values with escapes are not yielded (no line type, time or
// model has one).
func stringValues(b []byte, key string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		k := []byte(key)
		off := 0
		for {
			i := bytes.Index(b[off:], k)
			if i < 0 {
				return
			}
			i += off
			off = i + len(k)
			if escaped(b, i) {
				continue
			}
			j := skipSpace(b, off)
			if j >= len(b) || b[j] != ':' {
				continue
			}
			j = skipSpace(b, j+1)
			if j >= len(b) || b[j] != '"' {
				continue
			}
			end := bytes.IndexByte(b[j+1:], '"')
			if end < 0 {
				return
			}
			v := b[j+1 : j+1+end]
			if bytes.IndexByte(v, '\\') >= 0 {
				continue
			}
			if !yield(string(v)) {
				return
			}
		}
	}
}

// escapedLetter reports whether b holds a \u00XX escape of a letter or
// '-' (the characters of keys and line types).
func escapedLetter(b []byte) bool {
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte(`\u00`))
		if i < 0 || off+i+6 > len(b) {
			return false
		}
		i += off
		off = i + 4
		v, err := strconv.ParseUint(string(b[i+4:i+6]), 16, 8)
		if err == nil && (v == '-' || v == '_' || (v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z')) {
			return true
		}
	}
}

// escaped reports whether the quote at b[i] is preceded by an odd number
// of backslashes.
func escaped(b []byte, i int) bool {
	n := 0
	for i--; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// Head is what a conversation line of the head gives when decoded: the
// session's original folder and first prompt.
type Head struct {
	SessionID string
	Cwd       string
	Version   string
	GitBranch string
	Prompt    string // the text of a user line that is a person's prompt; "" otherwise
}

// headLine is the part of a conversation line ParseHead decodes.
type headLine struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionId"`
	Cwd       string          `json:"cwd"`
	Version   string          `json:"version"`
	GitBranch string          `json:"gitBranch"`
	IsMeta    bool            `json:"isMeta"`
	Sidechain bool            `json:"isSidechain"`
	Message   json.RawMessage `json:"message"`
}

// ParseHead decodes a user or assistant line of the head. A user line's
// prompt is its text content (a string, or its text blocks), unless the
// line is meta, a sidechain's, a tool result, or text troupe should not
// show as a title (command wrappers and reminders starting with '<').
func ParseHead(b []byte) (Head, error) {
	var l headLine
	if err := json.Unmarshal(b, &l); err != nil {
		return Head{}, err
	}
	h := Head{SessionID: l.SessionID, Cwd: l.Cwd, Version: l.Version, GitBranch: l.GitBranch}
	if l.Type != "user" || l.IsMeta || l.Sidechain || len(l.Message) == 0 {
		return h, nil
	}
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(l.Message, &m) != nil {
		return h, nil
	}
	h.Prompt = promptText(m.Content)
	return h, nil
}

// promptText is the person's text in a user message's content: a string,
// or the text blocks of a list without a tool result.
func promptText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return cleanPrompt(s)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, bl := range blocks {
		switch bl.Type {
		case "tool_result":
			return ""
		case "text":
			if t := cleanPrompt(bl.Text); t != "" {
				parts = append(parts, t)
			}
		}
	}
	return strings.Join(parts, " ")
}

func cleanPrompt(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasPrefix(s, "<") || strings.HasPrefix(s, "[Request interrupted") {
		return ""
	}
	return s
}

// ParseTitle decodes a title line: an ai-title's aiTitle, a custom-title's
// customTitle, a summary's summary.
func ParseTitle(b []byte) (string, error) {
	var t struct {
		AITitle     string `json:"aiTitle"`
		CustomTitle string `json:"customTitle"`
		Summary     string `json:"summary"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", err
	}
	for _, s := range []string{t.CustomTitle, t.AITitle, t.Summary} {
		if s = strings.TrimSpace(s); s != "" {
			return s, nil
		}
	}
	return "", nil
}

// ParseTime reads a line's RFC 3339 timestamp; zero when it is not one.
func ParseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// Entry is a transcript line as a reader of a turn needs it: its type,
// and the message's role and content blocks (Block).
type Entry struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Content any    `json:"content"`
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// Error and APIErrorStatus mark the assistant line the CLI writes for
	// a failed model request (model "<synthetic>", its text the error):
	// "rate_limit" and 429 for a usage or rate limit.
	Error          string `json:"error"`
	APIErrorStatus int    `json:"apiErrorStatus"`
}

// Block is one content block of a message: its type ("text",
// "tool_use", "tool_result", ...); for text, the text; for a tool use,
// its id, tool name and input; for a tool result, the use it answers.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}
