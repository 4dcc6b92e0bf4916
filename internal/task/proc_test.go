package task

import (
	"os"
	"strings"
	"testing"
)

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in          string
		lines, size int
		want        string
	}{
		{"", 20, 100, ""},
		{"a\nb\nc\n", 2, 100, "b\nc"},
		{"a\nb\nc", 5, 100, "a\nb\nc"},
		{"a\nb\nc\n\n\n", 1, 100, "c"},
		{"hello\nworld", 20, 3, "rld"},
		{"é\nxé", 20, 3, "xé"},
		{"\xff\xfe ok", 20, 100, "\uFFFD ok"},
	} {
		if got := lastLines([]byte(tc.in), tc.lines, tc.size); got != tc.want {
			t.Errorf("lastLines(%q, %d, %d) = %q, want %q", tc.in, tc.lines, tc.size, got, tc.want)
		}
	}
}

func TestTailFileStartsAtARune(t *testing.T) {
	p := t.TempDir() + "/f"
	must(t, os.WriteFile(p, []byte("aé"), 0o600)) // 'é' is 2 bytes
	b, err := tailFile(p, 1)
	if err != nil || len(b) != 0 {
		t.Errorf("tail 1 of a cut rune: %q, %v; want nothing", b, err)
	}
	b, err = tailFile(p, 2)
	if err != nil || string(b) != "é" {
		t.Errorf("tail 2: %q, %v", b, err)
	}
	b, err = tailFile(p, 100)
	if err != nil || string(b) != "aé" {
		t.Errorf("tail 100: %q, %v", b, err)
	}
}

func TestCompletionText(t *testing.T) {
	tk := Task{ID: "3f2a", Command: "make test", Timeout: 0}
	tk.StartedAt = tk.StartedAt.Add(1)
	res := Result{State: Exited, EndedAt: tk.StartedAt.Add(3200 * 1e6)}
	got := completionText(tk, res, nil, OutputSize{}, []byte("ok\nPASS\n"))
	if want := "task 3f2a `make test` exited 0 after 3.2s. Last lines of output:\nok\nPASS"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	got = completionText(tk, Result{State: Lost, Reason: "the supervisor vanished", EndedAt: res.EndedAt}, nil, OutputSize{}, nil)
	if want := "task 3f2a `make test` was lost after 3.2s: the supervisor vanished. It wrote no output."; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	tk.Command = strings.Repeat("x", 500)
	if got := completionText(tk, res, nil, OutputSize{}, nil); len(got) > 250 {
		t.Errorf("a long command is quoted whole: %d bytes", len(got))
	}
}
