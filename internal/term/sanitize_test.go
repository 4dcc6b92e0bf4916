package term

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// filterCases: each input and what a viewer gets of it.
var filterCases = []struct{ name, in, want string }{
	{"plain text and SGR", "a\x1b[1;31mred\x1b[0m\r\n", "a\x1b[1;31mred\x1b[0m\r\n"},
	{"clipboard write, BEL", "a\x1b]52;c;ZWNobyBwd25lZAo=\x07b", "ab"},
	{"clipboard write, ST", "a\x1b]52;c;ZWNobyBwd25lZAo=\x1b\\b", "ab"},
	{"clipboard read", "\x1b]52;c;?\x07x", "x"},
	{"font", "\x1b]50;?\x07x", "x"},
	{"iTerm2 file", "\x1b]1337;File=name=eA==;inline=0:AAAA\x07x", "x"},
	{"title kept", "\x1b]0;my title\x07\x1b]2;t\x1b\\", "\x1b]0;my title\x07\x1b]2;t\x1b\\"},
	{"hyperlink kept", "\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\", "\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\"},
	{"colour query kept", "\x1b]11;?\x07\x1b]104\x07", "\x1b]11;?\x07\x1b]104\x07"},
	// The ESC ESC inside ends the DCS as on a terminal (not tmux): the
	// OSC 52 after it is judged, and dropped, on its own; a lone ESC and
	// an ST remain (nothing to a terminal).
	{"tmux passthrough", "a\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\b", "a\x1b\x1b\\b"},
	{"kitty remote control", "a\x1bP@kitty-cmd{\"cmd\":\"launch\"}\x1b\\b", "ab"},
	{"DECRQSS kept", "\x1bP$qm\x1b\\", "\x1bP$qm\x1b\\"},
	{"XTGETTCAP kept", "\x1bP+q544e\x1b\\", "\x1bP+q544e\x1b\\"},
	{"sixel kept", "\x1bP0;1;0q#0~~\x1b\\", "\x1bP0;1;0q#0~~\x1b\\"},
	{"APC dropped", "a\x1b_Gi=1,t=f;L2V0Yy9wYXNzd2Q=\x1b\\b", "ab"},
	{"PM and SOS dropped", "a\x1b^pm\x1b\\\x1bXsos\x1b\\b", "ab"},
	{"window resize dropped", "a\x1b[8;100;300tb\x1b[9;1t\x1b[2t\x1b[3;0;0t\x1b[48t", "ab"},
	{"window reports kept", "\x1b[18t\x1b[14t\x1b[22;0t\x1b[23;0t", "\x1b[18t\x1b[14t\x1b[22;0t\x1b[23;0t"},
	{"private t kept", "\x1b[>4;1t", "\x1b[>4;1t"},
	{"string cut by a new sequence", "\x1b]52;c;eA==\x1b[1mB", "\x1b[1mB"},
	{"string cancelled by CAN", "\x1b]52;c;eA==\x18B", "B"},
	{"unterminated OSC number", "\x1b]" + strings.Repeat("5", 100) + ";x\x07y", "y"},
	{"long CSI dropped", "\x1b[" + strings.Repeat("1;", 400) + "8;1;1tz", "z"},
	{"lone ESC pairs", "\x1b7\x1b8\x1b\x1b[1m", "\x1b7\x1b8\x1b\x1b[1m"},
}

// TestOutputFilter: the sequences that act on the person's machine are
// dropped, the rest passed unchanged, whatever the chunks the stream comes
// in (each input is also fed one byte a write).
func TestOutputFilter(t *testing.T) {
	for _, c := range filterCases {
		var f outputFilter
		if got := string(f.filter(nil, []byte(c.in))); got != c.want {
			t.Errorf("%s: %q → %q, want %q", c.name, c.in, got, c.want)
		}
		var g outputFilter
		var got []byte
		for i := range len(c.in) {
			got = g.filter(got, []byte{c.in[i]})
		}
		if string(got) != c.want {
			t.Errorf("%s, a byte a write: %q → %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// FuzzOutputFilter: the filter's output does not depend on where the
// stream is cut, and never holds a clipboard sequence.
func FuzzOutputFilter(f *testing.F) {
	for _, c := range filterCases {
		f.Add([]byte(c.in), uint16(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		var whole outputFilter
		a := whole.filter(nil, data)
		var parts outputFilter
		k := int(split) % (len(data) + 1)
		b := parts.filter(nil, data[:k])
		b = parts.filter(b, data[k:])
		if !bytes.Equal(a, b) {
			t.Fatalf("%q: whole %q, cut at %d %q", data, a, k, b)
		}
		if bytes.Contains(a, []byte("\x1b]52")) {
			t.Fatalf("%q: a clipboard sequence passed: %q", data, a)
		}
	})
}

// TestViewerStreamFiltered: an attached viewer does not get the program's
// clipboard write, and gets the text around it; the emulator still sees
// the title the program set.
func TestViewerStreamFiltered(t *testing.T) {
	script := `IFS= read -r line; printf 'before\033]52;c;ZWNobyBwd25lZAo=\007\033]0;T1\007after\r\n'; sleep 30`
	term, err := Start(Options{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}, StopTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close(context.Background())
	v, err := term.Attach()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Detach()
	if err := term.Write(context.Background(), []byte("go\r")); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	timeout := time.After(20 * time.Second)
	for !strings.Contains(got.String(), "after") {
		select {
		case b, ok := <-v.Output():
			if !ok {
				t.Fatalf("viewer detached: %s", v.Reason())
			}
			got.Write(b)
		case <-timeout:
			t.Fatalf("no 'after' in %q", got.String())
		}
	}
	if s := got.String(); strings.Contains(s, "]52") || !strings.Contains(s, "before\x1b]0;T1\x07after") {
		t.Errorf("viewer got %q", s)
	}
	if s := waitText(t, term, "after"); s.Title != "T1" {
		t.Errorf("title %q", s.Title)
	}
}

// BenchmarkOutputFilter: the viewers' filter over a captured Claude Code
// session's output (bytes/s in MB/s), one pass as the reader feeds it.
func BenchmarkOutputFilter(b *testing.B) {
	data, err := os.ReadFile("testdata/tui_mcp_flow.out.raw")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	buf := make([]byte, 0, len(data))
	for b.Loop() {
		var f outputFilter
		buf = f.filter(buf[:0], data)
	}
}
