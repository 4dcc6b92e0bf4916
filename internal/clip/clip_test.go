package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestHead: a bound that falls inside a 2-, 3- or 4-byte character keeps
// the character out whole; on a boundary, the bound is the cut.
func TestHead(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"abc", -1, ""},
		{"aé", 1, "a"},   // é is 2 bytes
		{"aé", 2, "a"},   // inside é
		{"aé", 3, "aé"},  // whole
		{"a€b", 2, "a"},  // € is 3 bytes: cut after its first
		{"a€b", 3, "a"},  // and after its second
		{"a€b", 4, "a€"}, // on the boundary
		{"a😀b", 4, "a"},  // 😀 is 4 bytes: cut after its third
		{"a😀b", 5, "a😀"}, // on the boundary
		{"é😀", 5, "é"},   // inside 😀
		{"\x80\x80\x80\x80\x80x", 4, "\x80\x80\x80\x80"}, // not UTF-8: cut at n
		{"a\xffbc", 2, "a\xff"},                          // invalid bytes kept
	} {
		if got := Head(tc.s, tc.n); got != tc.want {
			t.Errorf("Head(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := string(Head([]byte(tc.s), tc.n)); got != tc.want {
			t.Errorf("Head([]byte(%q), %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "bc"},
		{"abc", 0, ""},
		{"éa", 2, "a"},    // inside é
		{"éa", 3, "éa"},   // whole
		{"x€", 2, ""},     // inside €
		{"x€", 3, "€"},    // on the boundary
		{"😀x", 4, "x"},    // inside 😀
		{"\xa9x", 9, "x"}, // a window that starts inside a character
		{"\x80\x80\x80\x80x", 9, "\x80x"},
	} {
		if got := Tail(tc.s, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := string(Tail([]byte(tc.s), tc.n)); got != tc.want {
			t.Errorf("Tail([]byte(%q), %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestEllipsis(t *testing.T) {
	if got, cut := Ellipsis("héllo", 2); got != "h…" || !cut {
		t.Errorf("Ellipsis = %q, %v; want h…, true", got, cut)
	}
	if got, cut := Ellipsis("héllo", 6); got != "héllo" || cut {
		t.Errorf("Ellipsis = %q, %v; want héllo whole", got, cut)
	}
}

// FuzzHeadTail: valid UTF-8 stays valid; the cut is within the bound and
// at most 3 bytes short of it; the head and tail are prefix and suffix.
func FuzzHeadTail(f *testing.F) {
	f.Add("a€b😀c", 4)
	f.Add("\xf0\x9f\x98", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= len(s) + 2
		h, tl := Head(s, n), Tail(s, n)
		if !strings.HasPrefix(s, h) || !strings.HasSuffix(s, tl) {
			t.Fatalf("Head %q, Tail %q of %q", h, tl, s)
		}
		if n >= 0 && (len(h) > n || len(tl) > n) {
			t.Fatalf("over the bound %d: %q, %q", n, h, tl)
		}
		if n >= 0 && n < len(s) && (len(h) < n-3 || len(tl) < n-3) {
			t.Fatalf("cut too short for %d: %q, %q", n, h, tl)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(h) || !utf8.ValidString(tl)) {
			t.Fatalf("invalid UTF-8 from %q: %q, %q", s, h, tl)
		}
	})
}
