package troupe

import "testing"

func TestSentence(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no permission request p1 waits on you: see `troupe permissions`: not found", "no permission request p1 waits on you: see `troupe permissions`"},
		{"merging troupe/a into main conflicts in x.go: nothing was changed; resolve it: conflict", "merging troupe/a into main conflicts in x.go: nothing was changed; resolve it"},
		{"no Claude Code session s1 under /x: not found: see `troupe sessions`", "no Claude Code session s1 under /x: see `troupe sessions`"},
		{"find task t1: not found", "find task t1: not found"}, // too short alone
		{"project p1 is not registered: not found", "project p1 is not registered"},
		{"add project: /x is already registered as project p1: already exists", "add project: /x is already registered as project p1"},
		{"exec: \"foo\": executable file not found in $PATH", "exec: \"foo\": executable file not found in $PATH"}, // not a tag
		{"line one\nline  two: invalid", "line one line two: invalid"},                                             // four words: kept
		{"conflict", "conflict"},
	} {
		if got := Sentence(tc.in); got != tc.want {
			t.Errorf("Sentence(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
