package terminal

import (
	"regexp"
	"strings"
	"unicode"
)

// What a program animates while it works, or hangs: spinner glyphs, and
// counters of elapsed time. withoutAnimation removes them from a screen's
// text, so that only a change of what the screen says counts as activity.
var (
	// elapsed matches a count of time: "12s", "1.5 s", "3m", "2h",
	// "250ms", "4 secs", and clocks "0:42", "1:02:03".
	elapsed = regexp.MustCompile(`\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b|\b\d{1,2}:\d{2}(?::\d{2})?\b`)
	// asciiSpinner matches a classic spinner frame standing alone.
	asciiSpinner = regexp.MustCompile(`(?:^|\s)[|/\\-](?:\s|$)`)
)

// spinnerGlyph reports whether r is drawn by spinners: Braille patterns
// (⠋⠙⠹…), the stars and dots Claude Code and others turn (✻✽✶✢✳·•),
// circle and moon quarters (◐◓◑◒◴◷◶◵), the block elements of bars (▁▂▃…).
func spinnerGlyph(r rune) bool {
	switch {
	case r >= 0x2800 && r <= 0x28FF: // Braille
		return true
	case r >= 0x2580 && r <= 0x259F: // block elements
		return true
	case r >= 0x25D0 && r <= 0x25F7: // circles in quarters
		return true
	}
	return strings.ContainsRune("✻✽✶✢✳✺✹✸✷✵✴·•●○◌⏺∙⋅", r)
}

// withoutAnimation is text with its spinner glyphs and elapsed-time
// counters taken out and its blanks collapsed, line by line.
func withoutAnimation(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = strings.Map(func(r rune) rune {
			if spinnerGlyph(r) {
				return -1
			}
			return r
		}, l)
		l = elapsed.ReplaceAllString(l, "#")
		l = asciiSpinner.ReplaceAllString(l, " ")
		lines[i] = strings.Join(strings.FieldsFunc(l, unicode.IsSpace), " ")
	}
	return strings.Join(lines, "\n")
}
