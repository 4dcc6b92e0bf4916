package troupe

import "strings"

// sentinelWords are the texts of the sentinel errors: wrapped with %w they
// end up in an error's text, where a person reads them as noise.
var sentinelWords = []string{ErrNotFound.Error(), ErrAlreadyExists.Error(), ErrInvalid.Error(), ErrConflict.Error()}

// Sentence is an error's text as a person reads it (the API's error
// answers, the CLI's last line): on one line, without the sentinels' tag
// words that wrapping leaves in it ("…: conflict", "…: not found"), which
// callers branch on with errors.Is and which add nothing to a sentence
// that already says what happened and what to do. A tag stays when what
// precedes it is too short to say it alone ("find task t1: not found").
func Sentence(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	parts := strings.Split(msg, ": ")
	out := parts[:0]
	for i, p := range parts {
		if i > 0 && isSentinel(p) && len(strings.Fields(strings.Join(out, ": "))) >= 5 {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

func isSentinel(s string) bool {
	for _, w := range sentinelWords {
		if s == w {
			return true
		}
	}
	return false
}
