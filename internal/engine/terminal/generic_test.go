package terminal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/term"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// replScript is a small scripted REPL: it answers each line after a
// "working..." spell, asks a question of its own on "dialog", and sleeps
// on "slow" until interrupted (Ctrl-C ends the spell, not the REPL).
const replScript = `trap 'cancelled=1' INT
printf 'repl> '
while IFS= read -r line; do
  case "$line" in
    *dialog*) printf 'Overwrite everything? [y/n] '; read -r a; echo "you said $a";;
    *slow*) cancelled=; printf 'working...'
      for i in $(seq 300); do sleep 0.1; [ -n "$cancelled" ] && break; done
      printf '\r\033[K'; echo cancelled;;
    *) printf 'working...'; sleep 0.2; printf '\r\033[K'; echo "answer: $(echo "$line" | tr a-z A-Z)";;
  esac
  printf 'repl> '
done`

func replAgent(t *testing.T) (troupe.AgentSpec, string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "repl.sh")
	if err := os.WriteFile(script, []byte(replScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return troupe.AgentSpec{
		Name: "repl", Engine: troupe.EngineTerminal, Mode: troupe.ModeTerminal,
		Command: "/bin/sh", Args: []string{script},
		Options: map[string]any{
			"idle":   "repl>",
			"busy":   []any{"working..."},
			"dialog": "/\\[y/n\\]\\s*$/",
		},
	}, dir
}

func collect(t *testing.T, s engine.Session, turn troupe.TurnID) engine.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				t.Fatalf("events closed before turn %s ended: %v", turn, s.Err())
			}
			if ev.Kind == engine.EventTurnEnd && ev.Turn == turn {
				return ev
			}
		case <-timeout:
			t.Fatalf("turn %s did not end in 30s; screen:\n%s", turn, s.(*Session).t.Screen().All())
		}
	}
}

func input(turn troupe.TurnID, text string) engine.Input {
	return engine.Input{Turn: turn, Messages: []troupe.Message{{From: troupe.Person, Kind: troupe.KindAsk, Text: text, Request: "r-" + troupe.RequestID(turn)}}}
}

// TestGenericREPL drives a scripted REPL through its patterns: a turn's
// answer is what it printed before its prompt came back; a turn sent while
// it is busy waits; an interrupt stops a slow turn; a dialog leaves the
// agent blocked until it goes; Close ends it by its quit path.
func TestGenericREPL(t *testing.T) {
	agent, dir := replAgent(t)
	e := New(Options{StopTimeout: time.Second})
	if err := e.Check(agent); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := e.Start(ctx, engine.StartSpec{Key: troupe.RuntimeKey{Project: "p", Agent: "repl"}, Agent: agent, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	if err := s.Send(ctx, input("t1", "hello there")); err != nil {
		t.Fatal(err)
	}
	ev := collect(t, s, "t1")
	if ev.Error != "" || !strings.HasPrefix(ev.Text, "answer:") || !strings.Contains(ev.Text, "HELLO THERE") {
		t.Fatalf("turn 1 ended %+v", ev)
	}
	if strings.Contains(ev.Text, "repl>") {
		t.Errorf("turn 1's answer holds the next prompt: %q", ev.Text)
	}
	if s.Activity().Count == 0 {
		t.Error("no activity counted for the REPL's output")
	}

	// Interrupt a slow turn.
	if err := s.Send(ctx, input("t2", "slow please")); err != nil {
		t.Fatal(err)
	}
	tt := s.(*Session).t.(*term.Terminal)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := tt.WaitFor(wctx, func(sc term.Screen) bool { return strings.Contains(sc.Text(), "working...") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := collect(t, s, "t2"); ev.Error != "interrupted" {
		t.Fatalf("interrupted turn ended %+v", ev)
	}

	// A dialog: blocked, never idle, until the person answers it.
	if err := s.Send(ctx, input("t3", "dialog now")); err != nil {
		t.Fatal(err)
	}
	var blocked engine.Event
	for blocked.Kind != engine.EventBlocked {
		select {
		case blocked = <-s.Events():
			if blocked.Kind == engine.EventTurnEnd {
				t.Fatalf("turn ended on a dialog: %+v", blocked)
			}
		case <-wctx.Done():
			t.Fatal("no blocked event")
		}
	}
	if !strings.Contains(blocked.Text, "Overwrite everything?") {
		t.Errorf("blocked event lacks the screen: %q", blocked.Text)
	}
	v, err := s.(engine.TerminalSession).Terminal().Attach()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v.Snapshot()), "Overwrite everything?") {
		t.Errorf("snapshot lacks the dialog: %q", v.Snapshot())
	}
	if err := v.Type(ctx, []byte("y\r")); err != nil {
		t.Fatal(err)
	}
	v.Detach()
	var unblocked bool
	until := time.After(time.Minute)
	for {
		var ev engine.Event
		select {
		case ev = <-s.Events():
		case <-until:
			t.Fatal("the turn did not end within a minute of the answer")
		}
		if ev.Kind == engine.EventBlocked && ev.Text == "" {
			unblocked = true
		}
		if ev.Kind == engine.EventTurnEnd {
			if !unblocked || !strings.Contains(ev.Text, "you said y") {
				t.Fatalf("after the dialog: unblocked %v, turn end %+v", unblocked, ev)
			}
			break
		}
	}

	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Errorf("Err after Close = %v", s.Err())
	}
}

func TestGenericCheck(t *testing.T) {
	e := New(Options{})
	good, _ := replAgent(t)
	for name, c := range map[string]struct {
		mut   func(a *troupe.AgentSpec)
		field string
	}{
		"no command":   {func(a *troupe.AgentSpec) { a.Command = "" }, "command"},
		"no idle":      {func(a *troupe.AgentSpec) { delete(a.Options, "idle") }, "terminal.idle"},
		"bad regexp":   {func(a *troupe.AgentSpec) { a.Options["busy"] = "/(/" }, "terminal.busy"},
		"unknown key":  {func(a *troupe.AgentSpec) { a.Options["prompt"] = "x" }, "terminal.prompt"},
		"not a string": {func(a *troupe.AgentSpec) { a.Options["dialog"] = 3 }, "terminal.dialog"},
	} {
		t.Run(name, func(t *testing.T) {
			a := good
			a.Options = map[string]any{}
			for k, v := range good.Options {
				a.Options[k] = v
			}
			c.mut(&a)
			var fe *troupe.FieldError
			if err := e.Check(a); !errors.As(err, &fe) || fe.Field != c.field {
				t.Errorf("Check = %v, want a FieldError on %s", err, c.field)
			}
		})
	}
	if err := e.Check(good); err != nil {
		t.Errorf("Check(good) = %v", err)
	}
}

// bashAgent is bash itself as a generic agent, its prompt "bash$ ".
func bashAgent(t *testing.T, opts map[string]any) (troupe.AgentSpec, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	o := map[string]any{"idle": "bash$"}
	for k, v := range opts {
		o[k] = v
	}
	return troupe.AgentSpec{
		Name: "sh", Engine: troupe.EngineTerminal, Mode: troupe.ModeTerminal,
		Command: bash, Args: []string{"--norc", "--noprofile"},
		Env:     map[string]string{"PS1": "bash$ ", "PS2": "", "HISTFILE": "/dev/null"},
		Options: o,
	}, t.TempDir()
}

func startAgent(t *testing.T, agent troupe.AgentSpec, dir string) engine.Session {
	t.Helper()
	e := New(Options{StopTimeout: time.Second})
	if err := e.Check(agent); err != nil {
		t.Fatal(err)
	}
	s, err := e.Start(context.Background(), engine.StartSpec{Key: troupe.RuntimeKey{Project: "p", Agent: troupe.AgentID(agent.Name)}, Agent: agent, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// TestGenericBash: bash as the agent is typed the message's text, not
// troupe's framing: no syntax error, and the answer is what the command
// printed, without the typed command; the same command again answers
// again.
func TestGenericBash(t *testing.T) {
	agent, dir := bashAgent(t, nil)
	s := startAgent(t, agent, dir)
	for i, turn := range []troupe.TurnID{"t1", "t2"} {
		ev := collect(t, s, sendTurn(t, s, turn, "echo hello from $((6*7))"))
		screen := s.(*Session).t.Screen().All()
		if strings.Contains(screen, "syntax error") || strings.Contains(screen, "troupe") {
			t.Fatalf("turn %d: bash was typed troupe's framing; screen:\n%s", i+1, screen)
		}
		if ev.Error != "" || ev.Text != "hello from 42" {
			t.Fatalf("turn %d ended %+v, want the answer %q; screen:\n%s", i+1, ev, "hello from 42", screen)
		}
	}
}

func sendTurn(t *testing.T, s engine.Session, turn troupe.TurnID, text string) troupe.TurnID {
	t.Helper()
	if err := s.Send(context.Background(), input(turn, text)); err != nil {
		t.Fatal(err)
	}
	return turn
}

// TestGenericInputTemplate: [agent.terminal] input writes each message
// through its placeholders.
func TestGenericInputTemplate(t *testing.T) {
	agent, dir := bashAgent(t, map[string]any{"input": `echo "{{{from} {kind} {request}}}"; {text}`})
	s := startAgent(t, agent, dir)
	ev := collect(t, s, sendTurn(t, s, "t1", "echo sum $((2+3))"))
	if want := "{person ask r-t1}\nsum 5"; ev.Error != "" || ev.Text != want {
		t.Fatalf("turn ended %+v, want the answer %q; screen:\n%s", ev, want, s.(*Session).t.Screen().All())
	}
}

// TestInputTemplateParse: the placeholders are filled in; a template with
// an unknown placeholder, an unclosed or lone brace, or no {text} is a
// FieldError on terminal.input saying what to write.
func TestInputTemplateParse(t *testing.T) {
	tmpl, err := parseInput("{{{tag}}} {from}/{kind}/{request}: {text}")
	if err != nil {
		t.Fatal(err)
	}
	in := engine.Input{Tag: "0123456789abcdef", Messages: []troupe.Message{
		{From: "lead", Kind: troupe.KindAsk, Request: "r1", Text: "one"},
		{From: troupe.Person, Kind: troupe.KindMessage, Text: "two\nlines"},
	}}
	if got, want := tmpl.render(in), "{0123456789abcdef} lead/ask/r1: one\n{0123456789abcdef} person/message/: two\nlines"; got != want {
		t.Errorf("render = %q, want %q", got, want)
	}
	if got := inputTemplate(nil).render(in); got != "one\ntwo\nlines" {
		t.Errorf("no template: %q, want the texts alone", got)
	}
	e := New(Options{})
	for bad, want := range map[string]string{
		"{txt}":        "unknown placeholder {txt}",
		"{text":        "not closed",
		"a } {text}":   "lone }",
		"{from} wrote": "must hold {text}",
	} {
		agent, _ := bashAgent(t, map[string]any{"input": bad})
		var fe *troupe.FieldError
		if err := e.Check(agent); !errors.As(err, &fe) || fe.Field != "terminal.input" || !strings.Contains(fe.Msg, want) {
			t.Errorf("input %q: Check = %v, want a FieldError on terminal.input saying %q", bad, err, want)
		}
	}
}
