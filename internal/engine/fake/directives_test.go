package fake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/engine"
)

// approverFunc decides permissions with a function.
type approverFunc func(engine.Permission) (engine.Decision, error)

func (f approverFunc) Approve(_ context.Context, p engine.Permission) (engine.Decision, error) {
	return f(p)
}

// TestEveryEventKind: a turn of the fake engine reports each kind the
// engine seam knows: output, thinking (!think), a tool call and its result
// (!tool), a permission request decided by the Approver with its decision
// available to later lines (!permission, {decision}), and the turn's usage
// right before its end.
func TestEveryEventKind(t *testing.T) {
	t.Parallel()
	var asked []engine.Permission
	spec := fakeSpec(&fakeTools{}, nil)
	spec.Approver = approverFunc(func(p engine.Permission) (engine.Decision, error) {
		asked = append(asked, p)
		if p.Tool == "Read" {
			return engine.Decision{Allow: true}, nil
		}
		return engine.Decision{Reason: "not in allowed_tools"}, nil
	})
	s := startAgent(t, Options{}, spec)
	send(t, s, "t1", "!think first {text}\n!tool list_agents {}\n!permission Read\n!say read: {decision}\n"+
		`!permission Bash {"command":"{from}"}`+"\n!say bash: {decision}")
	evs := collectAll(t, s, "t1")
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, string(ev.Kind))
	}
	want := "thinking tool_call tool_result permission output permission output usage turn_end"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if !strings.HasPrefix(evs[0].Text, "first !think") {
		t.Errorf("thinking = %q", evs[0].Text)
	}
	if c, r := evs[1].Tool, evs[2].Tool; c.Name != "list_agents" || string(c.Input) != "{}" || c.ID == "" || r.ID != c.ID || r.Output != "result of list_agents" || r.IsError {
		t.Errorf("tool call %+v, result %+v", c, r)
	}
	if p, d := evs[3].Permission, evs[3].Decision; p.Tool != "Read" || !d.Allow || p.Turn != "t1" || p.ID == "" {
		t.Errorf("permission %+v decided %+v", p, d)
	}
	if p, d := evs[5].Permission, evs[5].Decision; p.Tool != "Bash" || string(p.Input) != `{"command":"@person"}` || d.Allow {
		t.Errorf("permission %+v decided %+v", p, d)
	}
	if evs[4].Text != "read: allow" || evs[6].Text != "bash: deny: not in allowed_tools" {
		t.Errorf("decisions said %q, %q", evs[4].Text, evs[6].Text)
	}
	if u := evs[7].Usage; u == nil || u.InputTokens <= 500 || u.OutputTokens <= 1 || u.CostUSD <= 0 {
		t.Errorf("usage = %+v, want counts from the texts", u)
	}
	if len(asked) != 2 {
		t.Errorf("approver asked %d times, want 2", len(asked))
	}
}

// TestToolResultErrorAndNoApprover: a failing tool is reported with
// IsError; without an Approver a permission is denied, saying why.
func TestToolResultErrorAndNoApprover(t *testing.T) {
	t.Parallel()
	tools := &fakeTools{fn: func(context.Context, string) (string, error) { return "", errors.New("kaput") }}
	s := startAgent(t, Options{}, fakeSpec(tools, nil))
	send(t, s, "t1", "!tool boom {}\n!permission Edit\n!say {decision}")
	evs := collectAll(t, s, "t1")
	var res, perm *engine.Event
	for i, ev := range evs {
		switch ev.Kind {
		case engine.EventToolResult:
			res = &evs[i]
		case engine.EventPermission:
			perm = &evs[i]
		}
	}
	if res == nil || !res.Tool.IsError || res.Tool.Output != "kaput" {
		t.Errorf("tool result = %+v, want the error", res)
	}
	if perm == nil || perm.Decision.Allow || !strings.Contains(perm.Decision.Reason, engine.ErrNoApprover.Error()) {
		t.Errorf("permission = %+v, want denied for want of an approver", perm)
	}
	if end := evs[len(evs)-1]; !strings.HasPrefix(end.Text, "deny: "+engine.ErrNoApprover.Error()) {
		t.Errorf("turn end %+v", end)
	}
}

func TestPermissionDirectiveChecksItsInput(t *testing.T) {
	t.Parallel()
	s := startAgent(t, Options{}, engine.StartSpec{})
	_, end := turn(t, s, "t1", "!permission Bash [1]")
	if !strings.Contains(end.Error, "!permission Bash: args must be a JSON object") {
		t.Errorf("turn end %+v", end)
	}
}

// TestShAsksFirst: !sh is asked about like a CLI's shell tool: denied, it
// runs nothing; allowed, it runs and says the output and exit status.
func TestShAsksFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := fakeSpec(&fakeTools{}, nil)
	spec.Dir = dir
	spec.Approver = approverFunc(func(p engine.Permission) (engine.Decision, error) {
		if p.Tool == "Bash" && strings.Contains(string(p.Input), "allowed") {
			return engine.Decision{Allow: true}, nil
		}
		return engine.Decision{Reason: "no"}, nil
	})
	s := startAgent(t, Options{}, spec)
	send(t, s, "t1", "!sh touch denied.txt\n!sh echo allowed; exit 3")
	var said []string
	for _, ev := range collectAll(t, s, "t1") {
		if ev.Kind == engine.EventOutput {
			said = append(said, ev.Text)
		}
	}
	if got := strings.Join(said, "|"); got != "!sh not run: deny: no|allowed\nexit 3" {
		t.Errorf("said %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "denied.txt")); err == nil {
		t.Error("a denied !sh ran")
	}
}
