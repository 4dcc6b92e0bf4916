package term

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden screen files")

// capture is a raw PTY log made with script(1) -m advanced: the program's
// output in chunks, and where the person's input came between them.
type capture struct {
	out    []byte
	chunks []chunk
}

type chunk struct {
	input bool // an input event: the screen as the person saw it
	n     int  // bytes of output
}

// loadCapture reads testdata/<name>.out.raw and its .timing, the header
// and footer lines script(1) adds to the output left out.
func loadCapture(t testing.TB, name string) capture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".out.raw"))
	if err != nil {
		t.Fatal(err)
	}
	_, out, ok := bytes.Cut(raw, []byte("\n"))
	if !ok {
		t.Fatalf("%s: no header line", name)
	}
	if i := bytes.LastIndex(out, []byte("\nScript done on ")); i >= 0 {
		out = out[:i]
	}
	f, err := os.Open(filepath.Join("testdata", name+".timing"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := capture{out: out}
	sc := bufio.NewScanner(f)
	total := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		switch fields[0] {
		case "O":
			n, err := strconv.Atoi(fields[2])
			if err != nil {
				t.Fatalf("%s timing: %v", name, err)
			}
			c.chunks = append(c.chunks, chunk{n: n})
			total += n
		case "I":
			c.chunks = append(c.chunks, chunk{input: true})
		}
	}
	if total > len(out) {
		t.Fatalf("%s: timing counts %d bytes of output, the log has %d", name, total, len(out))
	}
	return c
}

// screens replays the capture into an emulator of 120×40 (the size it was
// made at) and returns the screen's text at each input event and at the end.
func (c capture) screens() []string {
	e := NewEmulator(120, 40, nil)
	defer e.Close()
	var shots []string
	off := 0
	lastInput := false
	for _, ch := range c.chunks {
		if ch.input {
			if !lastInput {
				shots = append(shots, e.Text())
			}
			lastInput = true
			continue
		}
		lastInput = false
		e.Write(c.out[off : off+ch.n])
		off += ch.n
	}
	e.Write(c.out[off:])
	return append(shots, e.Text())
}

var captures = []string{"tui_trust_flow", "tui_mcp_flow"}

// TestCaptureGoldens replays the raw captures of Claude Code's TUI and
// compares the screen at each input event with the golden files (the
// screens were checked by eye against tmux's captures in
// ../shared/fixtures/claude-code/tui/screens; -update rewrites them).
func TestCaptureGoldens(t *testing.T) {
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			shots := loadCapture(t, name).screens()
			var b strings.Builder
			for i, s := range shots {
				fmt.Fprintf(&b, "=== screen %d\n%s\n", i, s)
			}
			golden := filepath.Join("testdata", name+".screens.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update once)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("screens differ from %s:\n%s", golden, got)
			}
		})
	}
}

// TestCaptureDialogs checks what terminal-mode detection relies on, on the
// replayed screens, whitespace-insensitively (C10).
func TestCaptureDialogs(t *testing.T) {
	shots := loadCapture(t, "tui_trust_flow").screens()
	if len(shots) < 3 {
		t.Fatalf("only %d screens", len(shots))
	}
	first := shots[0]
	for _, want := range []string{"Quick safety check", "❯ No, exit", "Yes, I trust this folder", "Enter to confirm"} {
		if !Contains(first, want) {
			t.Errorf("trust dialog screen lacks %q:\n%s", want, first)
		}
	}
	last := shots[len(shots)-1]
	for _, want := range []string{"● Hi! This is the fake model answering.", "Resume this session with:"} {
		if !Contains(last, want) {
			t.Errorf("last screen lacks %q:\n%s", want, last)
		}
	}
	if Contains(last, "Quick safety check") {
		t.Errorf("the trust dialog is still on the last screen:\n%s", last)
	}
}
