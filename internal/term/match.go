package term

import (
	"regexp"
	"strings"
	"unicode"
)

// Normalize drops every whitespace character of s, so screen text compares
// whatever spacing, wrapping or padding the program's layout gave it (C10).
func Normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// Contains reports whether text shows want, whitespace-insensitively.
func Contains(text, want string) bool {
	return strings.Contains(Normalize(text), Normalize(want))
}

// Pattern is something to look for on a screen: a literal text (matched
// whitespace-insensitively) or, written /like this/, a regular expression
// matched against the screen's text with its whitespace runs made single
// spaces.
type Pattern struct {
	src string
	lit string
	re  *regexp.Regexp
}

// ParsePattern parses a pattern: "/re/" is a regular expression, anything
// else a literal.
func ParsePattern(s string) (Pattern, error) {
	if len(s) >= 2 && strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/") {
		re, err := regexp.Compile(s[1 : len(s)-1])
		if err != nil {
			return Pattern{}, err
		}
		return Pattern{src: s, re: re}, nil
	}
	return Pattern{src: s, lit: Normalize(s)}, nil
}

// String is the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether text shows the pattern.
func (p Pattern) Match(text string) bool {
	if p.re != nil {
		return p.re.MatchString(strings.Join(strings.Fields(text), " "))
	}
	return p.lit != "" && strings.Contains(Normalize(text), p.lit)
}
