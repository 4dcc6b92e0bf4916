// Package clip cuts a text to a bound in bytes without splitting a
// character: troupe's one UTF-8-safe clip.
//
// The contract, for every function here:
//   - the cut falls on a character boundary: a UTF-8 sequence that the
//     bound would split is left out whole (Head) or its continuation bytes
//     are (Tail), so at most utf8.UTFMax-1 bytes fewer than the bound are
//     kept;
//   - where it cut is said: by the length of what Head returns (the cut is
//     at that byte offset), by the "…" that Ellipsis puts there;
//   - nothing else changes: bytes that are not valid UTF-8 are kept as
//     they are, and a text within the bound comes back whole.
//
// Concurrency: pure functions.
//
// Who may import: anyone. It depends on nothing of troupe.
package clip

import "unicode/utf8"

// Head returns the longest prefix of s at most n bytes long that does not
// end inside a character: s[:i] with n-utf8.UTFMax < i <= n, or s whole
// when len(s) <= n. The cut is at byte len(Head(s, n)).
func Head[T ~string | ~[]byte](s T, n int) T {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return s[:0]
	}
	i := n
	for i > 0 && n-i < utf8.UTFMax-1 && !utf8.RuneStart(s[i]) {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = n // no character starts near the bound: not UTF-8, cut at n
	}
	return s[:i]
}

// Tail returns the longest suffix of s at most n bytes long that does not
// start inside a character: the continuation bytes (at most
// utf8.UTFMax-1) at its start are left out, as part of a character that
// was cut. s may itself be a window cut out of a longer text: its leading
// continuation bytes go even when len(s) <= n.
func Tail[T ~string | ~[]byte](s T, n int) T {
	if n < len(s) {
		s = s[len(s)-max(n, 0):]
	}
	i := 0
	for i < len(s) && i < utf8.UTFMax-1 && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Ellipsis is Head(s, n) followed by "…" where it cut (so up to n+3
// bytes), and whether it cut; s within the bound comes back whole.
func Ellipsis(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	return Head(s, n) + "…", true
}
