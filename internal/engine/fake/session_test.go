package fake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/proc"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestEchoTurn(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	outputs, end := turn(t, s, "t1", "hello there")
	if want := []string{"echo: hello there"}; !slices.Equal(outputs, want) {
		t.Errorf("outputs = %q, want %q", outputs, want)
	}
	if end.Kind != engine.EventTurnEnd || end.Text != "echo: hello there" || end.Error != "" {
		t.Errorf("turn end = %+v, want text %q and no error", end, "echo: hello there")
	}
}

func TestTwoTurnsInARow(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	for i, text := range []string{"first", "second"} {
		id := troupe.TurnID([]string{"t1", "t2"}[i])
		_, end := turn(t, s, id, text)
		if end.Text != "echo: "+text || end.Error != "" {
			t.Errorf("turn %s ended %+v, want %q", id, end, "echo: "+text)
		}
	}
}

func TestBatchOfThreeMessages(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	outputs, end := turn(t, s, "t1", "a", "b", "c")
	want := []string{"echo: a", "echo: b", "echo: c"}
	if !slices.Equal(outputs, want) {
		t.Errorf("outputs = %q, want %q", outputs, want)
	}
	if end.Text != strings.Join(want, "\n") || end.Error != "" {
		t.Errorf("turn end = %+v, want text %q", end, strings.Join(want, "\n"))
	}
}

func TestDirectives(t *testing.T) {
	t.Parallel()
	tools := &fakeTools{fn: func(ctx context.Context, tool string) (string, error) {
		if tool == "boom" {
			return "", errors.New("kaput")
		}
		return "result of " + tool, nil
	}}
	dir := t.TempDir()
	s := startAgent(t, Options{}, engine.StartSpec{Dir: dir, Tools: tools, Key: troupe.RuntimeKey{Project: "p1", Agent: "a"}})
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		text    string
		outputs []string // checked when not nil
		final   string
		err     string
		calls   []call
	}{
		{name: "say", text: "!say hello", outputs: []string{"hello"}, final: "hello"},
		{name: "plain lines around directives", text: "intro\n!say two\n   \nthree", outputs: []string{"intro", "two", "three"}, final: "intro\ntwo\nthree"},
		{name: "sleep", text: "!sleep 10ms\n!say woke", outputs: []string{"woke"}, final: "woke"},
		{name: "stream", text: "!stream 30ms 10ms\n!say done", outputs: []string{".", ".", ".", "done"}, final: "done"},
		{name: "ask", text: "!ask researcher what is 2+2?\n!say got {result}", final: "got result of ask_agent",
			calls: []call{{"ask_agent", map[string]any{"to": "researcher", "question": "what is 2+2?"}}}},
		{name: "send", text: "!send b hi there", outputs: []string{}, final: "",
			calls: []call{{"send_message", map[string]any{"to": "b", "text": "hi there"}}}},
		{name: "delegate", text: "!delegate b write the tests", final: "",
			calls: []call{{"delegate", map[string]any{"to": "b", "task": "write the tests"}}}},
		{name: "reply", text: "!reply 42", calls: []call{{"reply", map[string]any{"text": "42"}}}},
		{name: "bg", text: "!bg make test", calls: []call{{"run_in_background", map[string]any{"command": "make test"}}}},
		{name: "tool with templates", text: `!tool memory_search {"query":"{from} \"said\""}`,
			calls: []call{{"memory_search", map[string]any{"query": `@person "said"`}}}},
		{name: "tool error becomes the result", text: "!tool boom {}\n!say {result}", final: "error: kaput",
			calls: []call{{"boom", map[string]any{}}}},
		{name: "tool with args that are not an object", text: "!tool x [1]", err: "!tool x: args must be a JSON object"},
		{name: "fail", text: "!say partial\n!fail it broke\n!say never", outputs: []string{"partial"}, final: "partial", err: "it broke"},
		{name: "unknown directive", text: "!say hi\n!xyz now", outputs: []string{}, err: `unknown directive "!xyz": see the fake engine's directives`},
		{name: "bad duration", text: "!sleep soon", err: `!sleep: bad duration "soon": write a Go duration of at least 0s, such as 300ms or 2s`},
		{name: "missing arguments", text: "!ask researcher", err: `!ask: missing arguments: write "!ask AGENT QUESTION"`},
		{name: "extra arguments", text: "!exit now", err: `!exit: takes no arguments: write "!exit"`},
		{name: "from template", text: "!say from {from}", final: "from @person"},
		{name: "env", text: "!env " + ChildEnv, final: ChildEnv + "=1"},
		{name: "cwd", text: "!cwd", final: realDir},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := troupe.TurnID("t" + string(rune('a'+i)))
			outputs, end := turn(t, s, id, tc.text)
			if tc.outputs != nil && !slices.Equal(outputs, tc.outputs) && !(len(outputs) == 0 && len(tc.outputs) == 0) {
				t.Errorf("outputs = %q, want %q", outputs, tc.outputs)
			}
			if end.Text != tc.final || end.Error != tc.err {
				t.Errorf("turn end text %q error %q, want text %q error %q", end.Text, end.Error, tc.final, tc.err)
			}
			if got := tools.take(); !reflect.DeepEqual(got, tc.calls) && !(len(got) == 0 && len(tc.calls) == 0) {
				t.Errorf("tool calls = %v, want %v", got, tc.calls)
			}
		})
	}
}

func TestToolsNil(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	_, end := turn(t, s, "t1", "!ask b q\n!say {result}")
	if end.Text != "error: no tools" || end.Error != "" {
		t.Errorf("turn end = %+v, want text %q", end, "error: no tools")
	}
}

func TestRespondScript(t *testing.T) {
	t.Parallel()
	tools := &fakeTools{fn: func(ctx context.Context, tool string) (string, error) { return "4", nil }}
	s := startAgent(t, Options{}, fakeSpec(tools, map[string]any{
		"respond": "!say Asking the researcher.\n!ask researcher {text}\n!say The researcher says: {result}",
	}))
	outputs, end := turn(t, s, "t1", "what is 2+2?")
	want := []string{"Asking the researcher.", "The researcher says: 4"}
	if !slices.Equal(outputs, want) || end.Text != strings.Join(want, "\n") || end.Error != "" {
		t.Errorf("outputs %q, end %+v; want outputs %q", outputs, end, want)
	}
	if got, want := tools.take(), []call{{"ask_agent", map[string]any{"to": "researcher", "question": "what is 2+2?"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	// A message with directives of its own bypasses the script.
	if _, end := turn(t, s, "t2", "!say direct"); end.Text != "direct" {
		t.Errorf("turn end = %+v, want %q", end, "direct")
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"respond": "!say hi", "foo": 1}, `agent "x": [agent.fake]: unknown option "foo": valid options are journal, respond, tool_timeout`},
		{map[string]any{"respond": 3}, `agent "x": [agent.fake]: respond must be a string of directive lines, not int`},
		{map[string]any{"respond": "!say ok\n!xyz"}, `agent "x": [agent.fake]: respond: line 2: unknown directive "!xyz": see the fake engine's directives`},
	}
	for _, tc := range tests {
		spec := fakeSpec(nil, tc.opts)
		spec.Agent.Name = "x"
		// No command: the options are checked before any process starts.
		_, err := New(Options{}).Start(context.Background(), spec)
		if err == nil || err.Error() != tc.want {
			t.Errorf("start with %v: error %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestStartFailsClearly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command []string
		dir     string
		want    string
	}{
		{"no command", nil, "", "start fake agent a: no command"},
		{"missing program", []string{"/nonexistent/troupe"}, "", "no such file or directory"},
		{"missing dir", TestCommand(), "/nonexistent/dir", "start fake agent a: working directory: stat /nonexistent/dir: no such file or directory"},
		{"child dies before ready", []string{"/bin/sh", "-c", "echo broken setup >&2; exit 7"}, "",
			"start fake agent a: fake agent exited: exit status 7: broken setup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := fakeSpec(nil, nil)
			spec.Dir = tc.dir
			if spec.Dir == "" {
				spec.Dir = t.TempDir()
			}
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			s, err := New(Options{Command: tc.command}).Start(ctx, spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("start: error %v, want it to contain %q", err, tc.want)
			}
			if s != nil {
				t.Errorf("start returned a session with an error")
			}
		})
	}
}

func TestActivityAdvancesOnEveryStreamChunk(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	before := s.Activity()
	if before.Count == 0 || before.At.IsZero() {
		t.Errorf("activity after start = %+v: the ready line should count", before)
	}
	send(t, s, "t1", "!stream 50ms 10ms")
	// The token advances before each event is delivered (the reader may be
	// ahead of this test, never behind it).
	chunks, seen := 0, uint64(0)
	last := before
	for {
		ev, ok := next(t, s)
		if !ok {
			t.Fatalf("events closed: %v", s.Err())
		}
		if ev.Kind == engine.EventUsage { // reported with the turn end, not a line of its own
			continue
		}
		seen++
		now := s.Activity()
		if now.Count < before.Count+seen || now.At.Before(last.At) {
			t.Fatalf("activity %+v after %d events since %+v", now, seen, before)
		}
		last = now
		if ev.Kind == engine.EventTurnEnd {
			break
		}
		chunks++
	}
	if chunks != 5 {
		t.Errorf("%d chunks, want 5", chunks)
	}
	if got, want := last.Count-before.Count, uint64(5+1); got != want { // 5 chunks and the turn end
		t.Errorf("activity advanced by %d, want %d", got, want)
	}
}

func TestActivityStillDuringSleep(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	before := s.Activity()
	outputs, end := turn(t, s, "t1", "!sleep 50ms")
	if len(outputs) != 0 || end.Error != "" {
		t.Fatalf("outputs %q, end %+v", outputs, end)
	}
	if got := s.Activity().Count - before.Count; got != 1 { // the turn end only
		t.Errorf("activity advanced by %d during a silent sleep, want 1 (the turn end)", got)
	}
}

func TestToolBlocksWhileChildStreams(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	tools := &fakeTools{fn: func(ctx context.Context, tool string) (string, error) {
		close(started)
		select {
		case <-release:
			return "the answer", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	s := startAgent(t, Options{}, fakeSpec(tools, nil))
	send(t, s, "t1", "!heartbeat 2ms\n!ask b the question\n!say got {result}")
	if ev, ok := next(t, s); !ok || ev.Kind != engine.EventToolCall || ev.Tool.Name != "ask_agent" {
		t.Fatalf("event %+v (open %v), want the tool call first", ev, ok)
	}
	<-started
	before := s.Activity()
	// The tool is blocked until released: the parent must keep reading
	// the child's chunks meanwhile.
	// Chunks already buffered when before was read may have counted
	// before it: read chunks until five more are counted (bounded).
	for i := 0; s.Activity().Count-before.Count < 5; i++ {
		if i == 50 {
			t.Fatalf("activity advanced by %d over 50 chunks", s.Activity().Count-before.Count)
		}
		ev, ok := next(t, s)
		if !ok || ev.Kind != engine.EventOutput || ev.Text != "." {
			t.Fatalf("event %+v (open %v), want a heartbeat chunk while the tool blocks", ev, ok)
		}
	}
	close(release)
	outputs, end := collect(t, s, "t1")
	if end.Text != "got the answer" || end.Error != "" {
		t.Errorf("turn end = %+v, want %q", end, "got the answer")
	}
	if i := slices.Index(outputs, "got the answer"); i < 0 {
		t.Errorf("outputs %q lack the final line", outputs)
	}
}

func TestSendWhileBusyIsRefused(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	send(t, s, "t1", "!sleep 1h")
	err := s.Send(context.Background(), engine.Input{Turn: "t2", Messages: []troupe.Message{msg("hi")}})
	if err == nil || err.Error() != "send turn t2: turn t1 still running" {
		t.Fatalf("send while busy: %v", err)
	}
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, end := collect(t, s, "t1"); end.Error != "interrupted" {
		t.Fatalf("turn end = %+v, want error interrupted", end)
	}
	if _, end := turn(t, s, "t3", "hi"); end.Text != "echo: hi" {
		t.Errorf("turn after the refused one = %+v", end)
	}
	for _, in := range []engine.Input{{Turn: "", Messages: []troupe.Message{msg("x")}}, {Turn: "t4"}} {
		if err := s.Send(context.Background(), in); err == nil {
			t.Errorf("send %+v: no error", in)
		}
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	toolStarted, toolDone := make(chan struct{}, 1), make(chan error, 1)
	tools := &fakeTools{fn: func(ctx context.Context, tool string) (string, error) {
		toolStarted <- struct{}{}
		<-ctx.Done()
		toolDone <- ctx.Err()
		return "", ctx.Err()
	}}
	s := startAgent(t, Options{}, fakeSpec(tools, nil))
	if err := s.Interrupt(context.Background()); err != nil {
		t.Errorf("interrupt while idle: %v", err)
	}
	for i, text := range []string{"!say working\n!sleep 1h\n!say never", "!say asking\n!ask b q\n!say never"} {
		id := troupe.TurnID([]string{"sleep", "tool"}[i])
		send(t, s, id, text)
		if ev, ok := next(t, s); !ok || ev.Kind != engine.EventOutput {
			t.Fatalf("first event %+v, want output", ev)
		}
		if id == "tool" {
			<-toolStarted // else the interrupt may come before the call
		}
		if err := s.Interrupt(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, end := collect(t, s, id)
		if end.Error != "interrupted" || end.Text != strings.TrimPrefix(strings.SplitN(text, "\n", 2)[0], "!say ") {
			t.Errorf("turn %s end = %+v, want error interrupted and the text said so far", id, end)
		}
	}
	select {
	case err := <-toolDone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("tool ctx ended with %v", err)
		}
	case <-time.After(patience):
		t.Fatal("the interrupted turn's tool call was not cancelled")
	}
	if _, end := turn(t, s, "after", "hi"); end.Text != "echo: hi" {
		t.Errorf("turn after interrupts = %+v", end)
	}
}

func TestCrashMidTurn(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	send(t, s, "t1", "!say before\n!crash\n!say never")
	evs := waitClosed(t, s)
	if len(evs) != 1 || evs[0].Text != "before" {
		t.Errorf("events before the crash = %+v", evs)
	}
	want := "fake agent exited: exit status 3: fake agent crashing on purpose"
	if err := s.Err(); err == nil || err.Error() != want {
		t.Errorf("Err = %v, want %q", err, want)
	}
	if err := s.Send(context.Background(), engine.Input{Turn: "t2", Messages: []troupe.Message{msg("hi")}}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("send after crash: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("close after crash: %v", err)
	}
	if err := s.Err(); err == nil {
		t.Error("Err after closing a crashed session lost the reason")
	}
	assertGroupGone(t, s)
}

func TestExitMidTurn(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	send(t, s, "t1", "!exit")
	waitClosed(t, s)
	if err := s.Err(); err == nil || err.Error() != "fake agent exited: exit status 0" {
		t.Errorf("Err = %v", err)
	}
}

func TestCloseIsGraceful(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	turn(t, s, "t1", "hi")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); ok {
		t.Error("events open after close")
	}
	if s.Err() != nil || s.proc.ExitErr() != nil {
		t.Errorf("Err %v, exit %v: want a clean exit at end of input", s.Err(), s.proc.ExitErr())
	}
	if err := s.Send(context.Background(), engine.Input{Turn: "t2", Messages: []troupe.Message{msg("hi")}}); err == nil || err.Error() != "send turn t2: session closed" {
		t.Errorf("send after close: %v", err)
	}
	assertGroupGone(t, s)
}

func TestCloseEscalates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		text   string
		signal syscall.Signal
		ctx    func() context.Context
	}{
		{"child ignores end of input: SIGTERM", "!ignore-eof", syscall.SIGTERM, context.Background},
		{"child ignores SIGTERM too: SIGKILL", "!ignore-eof\n!ignore-term", syscall.SIGKILL, context.Background},
		{"context already done: SIGKILL at once", "!ignore-eof\n!ignore-term", syscall.SIGKILL, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stop := 100 * time.Millisecond
			if tc.signal == syscall.SIGKILL && tc.ctx() != context.Background() {
				stop = time.Hour // only the done context can make Close skip the waits
			}
			s := startAgent(t, Options{StopTimeout: stop}, engine.StartSpec{})
			turn(t, s, "t1", tc.text)
			start := time.Now()
			s.Close(tc.ctx())
			<-s.proc.Done() // Close returned only after reaping
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > patience {
				t.Errorf("close took %v", d)
			}
			ws := s.proc.ProcessState().Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != tc.signal {
				t.Errorf("child ended with %v, want signal %v", s.proc.ProcessState(), tc.signal)
			}
			if s.Err() != nil {
				t.Errorf("Err after Close = %v", s.Err())
			}
			assertGroupGone(t, s)
		})
	}
}

func TestCloseCancelsBlockedTool(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	tools := &fakeTools{fn: func(ctx context.Context, tool string) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	s := startAgent(t, Options{}, fakeSpec(tools, nil))
	send(t, s, "t1", "!ask b q")
	<-started
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range s.Events() {
	}
	assertGroupGone(t, s)
}

func TestChildProcessGroupAndDir(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	pgid, err := syscall.Getpgid(s.PID())
	if err != nil || pgid != s.PID() {
		t.Errorf("child pgid = %d, %v; want its own group %d", pgid, err, s.PID())
	}
}

// Not parallel: it sets the test's environment.
func TestChildEnvIsBuilt(t *testing.T) {
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("CLAUDE_CODE_ENTRYPOINT", "cli")
	t.Setenv("TROUPE_TEST_LEAK", "leaked")
	t.Setenv("HOME", t.TempDir())
	spec := engine.StartSpec{}
	spec.Agent.Name = "a"
	spec.Agent.Env = map[string]string{"AGENT_VAR": "v", "CLAUDE_CODE_X": "y", ChildEnv: "0"} // the person's Claude settings pass
	s := startAgent(t, Options{}, spec)
	names := []string{"PATH", "HOME", "AGENT_VAR", ChildEnv, "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_X", "TROUPE_TEST_LEAK"}
	var lines []string
	for _, n := range names {
		lines = append(lines, "!env "+n)
	}
	outputs, _ := turn(t, s, "t1", strings.Join(lines, "\n"))
	want := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AGENT_VAR=v", ChildEnv + "=1",
		"CLAUDECODE unset", "CLAUDE_CODE_ENTRYPOINT unset", "CLAUDE_CODE_X=y", "TROUPE_TEST_LEAK unset",
	}
	if !slices.Equal(outputs, want) {
		t.Errorf("child env:\n got %q\nwant %q", outputs, want)
	}
}

// Not parallel: it counts the goroutines of every session in the process.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	release := make(chan struct{})
	tools := &fakeTools{fn: func(ctx context.Context, tool string) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "", nil
	}}
	var sessions []*Session
	for i, text := range []string{"hi", "!crash", "!ask b q", "!ignore-eof", "!heartbeat 1ms\n!ask b q"} {
		s := startAgent(t, Options{StopTimeout: 50 * time.Millisecond}, fakeSpec(tools, nil))
		sessions = append(sessions, s)
		send(t, s, troupe.TurnID("t"+string(rune('0'+i))), text)
	}
	if ev, ok := next(t, sessions[0]); !ok || ev.Kind != engine.EventOutput {
		t.Fatalf("event %+v", ev)
	}
	for _, s := range sessions {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	deadline := time.Now().Add(patience)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "engine/fake.(*Session)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session goroutines left after Close:\n%s", stacks)
		}
		runtime.Gosched()
	}
	for _, s := range sessions {
		assertGroupGone(t, s)
	}
}

// assertGroupGone checks that nothing of the child's process group is left.
func assertGroupGone(t *testing.T, s *Session) {
	t.Helper()
	select {
	case <-s.proc.Done():
	default:
		t.Fatal("child not reaped")
	}
	if err := syscall.Kill(-s.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -0 on the child's group: %v, want ESRCH", err)
	}
}

func BenchmarkEchoTurn(b *testing.B) {
	s := startAgent(b, Options{}, engine.StartSpec{})
	turn(b, s, "warm", "hi")
	in := engine.Input{Turn: "t", Messages: []troupe.Message{msg("hello")}}
	ctx := context.Background()
	for b.Loop() {
		if err := s.Send(ctx, in); err != nil {
			b.Fatal(err)
		}
		for ev := range s.Events() {
			if ev.Kind == engine.EventTurnEnd {
				break
			}
		}
	}
}

// The stderr tail itself is proc's; this checks the session's use of it:
// every chunk is activity (C3), and the last line is the reason of a death.
func TestStderrIsActivityAndReason(t *testing.T) {
	t.Parallel()
	s, err := start(proc.Spec{Argv: []string{"/bin/sh", "-c", "echo first >&2; echo 'the reason  ' >&2; exit 4"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	waitClosed(t, s)
	if got := s.Activity(); got.Count == 0 || got.At.IsZero() {
		t.Errorf("activity %+v after output on stderr only", got)
	}
	if err := s.Err(); err == nil || err.Error() != "fake agent exited: exit status 4: the reason" {
		t.Errorf("Err = %v", err)
	}
}
