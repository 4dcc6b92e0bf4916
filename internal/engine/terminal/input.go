package terminal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// What a generic program is given for a turn: the text of its messages,
// one after another on lines of their own, and nothing of troupe's
// framing (engine.Render's tag line and headers are words for an agent
// that reads them; a shell or a REPL would take them for input). An agent
// may say how each message is written with a template, [agent.terminal]
// input, whose placeholders are inputFields.

// inputFields are the placeholders of an input template, each with what
// it stands for (README, "Generic terminal programs").
var inputFields = []string{"text", "from", "kind", "request", "tag"}

// inputPart is a piece of a parsed template: literal text, or a
// placeholder (field set).
type inputPart struct {
	lit, field string
}

// inputTemplate is a parsed [agent.terminal] input; nil: the text alone.
type inputTemplate []inputPart

// parseInput parses an input template: literal text with {text}, {from},
// {kind}, {request} and {tag}; {{ and }} are literal braces. It must hold
// {text}: a template that drops the message is a mistake.
func parseInput(src string) (inputTemplate, error) {
	var t inputTemplate
	var lit strings.Builder
	hasText := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{', c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '}':
			return nil, fmt.Errorf("a lone } at byte %d: write }} for a literal brace", i+1)
		case c == '{':
			end := strings.IndexByte(src[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("a { at byte %d is not closed: write {{ for a literal brace, or a placeholder like {text}", i+1)
			}
			name := src[i+1 : i+1+end]
			if !slices.Contains(inputFields, name) {
				return nil, fmt.Errorf("unknown placeholder {%s}: use {text}, {from}, {kind}, {request} or {tag} ({{ and }} for literal braces)", name)
			}
			hasText = hasText || name == "text"
			if lit.Len() > 0 {
				t = append(t, inputPart{lit: lit.String()})
				lit.Reset()
			}
			t = append(t, inputPart{field: name})
			i += end + 1
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t = append(t, inputPart{lit: lit.String()})
	}
	if !hasText {
		return nil, fmt.Errorf(`must hold {text}, where the message's text goes, e.g. input = "{from} says: {text}"`)
	}
	return t, nil
}

// render writes a turn's input: each message through the template (or its
// text alone), on lines of their own, in order.
func (t inputTemplate) render(in engine.Input) string {
	var b strings.Builder
	for i, m := range in.Messages {
		if i > 0 {
			b.WriteString("\n")
		}
		if t == nil {
			b.WriteString(m.Text)
			continue
		}
		for _, p := range t {
			if p.field == "" {
				b.WriteString(p.lit)
				continue
			}
			b.WriteString(inputField(p.field, m, in.Tag))
		}
	}
	return b.String()
}

// inputField is what placeholder field stands for in message m of a turn
// of tag tag.
func inputField(field string, m troupe.Message, tag string) string {
	switch field {
	case "text":
		return m.Text
	case "from":
		if m.From == troupe.Person {
			return "person"
		}
		return string(m.From)
	case "kind":
		return string(m.Kind)
	case "request":
		return string(m.Request)
	case "tag":
		return tag
	}
	return ""
}
