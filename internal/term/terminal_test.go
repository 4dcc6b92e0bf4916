package term

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func waitText(t *testing.T, term *Terminal, want string) Screen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := term.WaitFor(ctx, func(s Screen) bool { return Contains(s.All(), want) })
	if err != nil {
		t.Fatalf("waiting for %q: %v; screen:\n%s", want, err, s.All())
	}
	return s
}

// TestTerminalREPL drives a shell REPL on a PTY: prompt, bracketed paste
// (with a hostile end-of-paste sequence inside), resize seen by the
// program, an attached viewer getting the snapshot and the stream, and a
// stop by escalation that reaps the child.
func TestTerminalREPL(t *testing.T) {
	script := `stty -echo; printf "\\033[?2004h"; printf 'ready> '; while IFS= read -r line; do
case "$line" in size) stty size;; *) printf 'got[%s]\n' "$line";; esac; printf 'ready> '; done`
	term, err := Start(Options{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}, Cols: 80, Rows: 24, StopTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close(context.Background())
	waitText(t, term, "ready>")
	ctx := context.Background()

	v, err := term.Attach()
	if err != nil {
		t.Fatal(err)
	}
	if !Contains(string(v.Snapshot()), "ready>") {
		t.Errorf("snapshot lacks the prompt: %q", v.Snapshot())
	}
	if err := term.Paste(ctx, "hello \x1b[201~world\r"); err != nil {
		t.Fatal(err)
	}
	// sh reads the paste markers as bytes; what matters is that the end
	// marker inside the text arrived as plain text, its ESC removed.
	if err := term.Write(ctx, []byte("\r")); err != nil {
		t.Fatal(err)
	}
	waitText(t, term, "got[hello [201~world")
	if err := v.Type(ctx, []byte("size\r")); err != nil {
		t.Fatal(err)
	}
	waitText(t, term, "24 80")
	if term.PersonTypedAt().IsZero() {
		t.Error("PersonTypedAt not set after the viewer typed")
	}
	if err := v.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	if err := term.Write(ctx, []byte("size\r")); err != nil {
		t.Fatal(err)
	}
	waitText(t, term, "30 100")
	var streamed strings.Builder
	for streamed.Len() == 0 || !strings.Contains(streamed.String(), "30 100") {
		b, ok := <-v.Output()
		if !ok {
			t.Fatalf("viewer detached: %s", v.Reason())
		}
		streamed.Write(b)
	}
	v.Detach()

	pid := term.PID()
	if err := term.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Done():
	default:
		t.Fatal("Close returned before Done")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("process %d still exists after Close", pid)
	}
	if err := term.Write(ctx, []byte("x")); err != ErrClosed {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

// TestTerminalQueries: a program that sends terminal queries at start (as
// Claude Code does) gets answers and goes on; the emulator never blocks.
func TestTerminalQueries(t *testing.T) {
	script := `stty raw -echo; printf '\033[c\033[6n'; dd bs=1 count=6 2>/dev/null | od -An -c | tr -d ' \n'; printf '\r\nanswered\r\n'; sleep 30`
	term, err := Start(Options{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close(context.Background())
	waitText(t, term, "answered")
}

func TestPasteSafe(t *testing.T) {
	got := PasteSafe("a\x1b[201~b\r\nc\x00d\te\u009bf")
	if want := "a[201~b\ncd\tef"; got != want {
		t.Errorf("PasteSafe = %q, want %q", got, want)
	}
}
