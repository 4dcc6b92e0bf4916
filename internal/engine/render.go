package engine

import (
	"fmt"
	"strings"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Render writes a turn's inbox messages as the one text an engine gives its
// agent, the same for every engine: each message under a header that says
// what it is (a message, a question whose answer is this turn's final
// output, a delegated task, a reply, a result, a task's completion), who
// sent it, and whether it is redelivered after a restart (C6). Messages are
// kept in order and whole.
func Render(in Input) string {
	var b strings.Builder
	for i, m := range in.Messages {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(header(m))
		b.WriteString("\n")
		b.WriteString(m.Text)
	}
	return b.String()
}

// RenderedLen is how many bytes m adds to Render's text: its header, a
// newline, its text, and the blank line that separates it from the next
// one (counted for every message, so the sum over a turn's messages is at
// least len(Render(in))).
func RenderedLen(m troupe.Message) int {
	return len(header(m)) + 1 + len(m.Text) + 2
}

// header is the line above one message.
func header(m troupe.Message) string {
	from := string(m.From)
	if m.From == troupe.Person {
		from = "the person you work for"
	}
	var h string
	switch m.Kind {
	case troupe.KindAsk:
		h = fmt.Sprintf("[question from %s (request %s): your final answer in this turn is sent back to it; or call reply]", from, m.Request)
	case troupe.KindDelegate:
		h = fmt.Sprintf("[task delegated by %s (request %s): do it; your final message in this turn is reported back as its result]", from, m.Request)
	case troupe.KindReply:
		h = fmt.Sprintf("[answer from %s to your question (request %s)]", from, m.Request)
	case troupe.KindResult:
		h = fmt.Sprintf("[result from %s of the task you delegated (request %s)]", from, m.Request)
	case troupe.KindTask:
		h = "[a background task you started has ended]"
	default:
		h = fmt.Sprintf("[message from %s]", from)
	}
	if m.Redelivered {
		h += " [redelivered: troupe restarted while you handled this; you may have begun on it already]"
	}
	return h
}
