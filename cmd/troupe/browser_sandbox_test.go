package main

import (
	"testing"
	"time"
)

// TestBrowserMarksUnsandboxedAgents: an agent whose team sets sandbox =
// false is marked unsandboxed in the web UI's team table and in its agent
// view, as troupe agents and doctor mark it; a sandboxed one is not.
func TestBrowserMarksUnsandboxedAgents(t *testing.T) {
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, "[[agent]]\nname = \"boxed\"\nengine = \"fake\"\n\n[[agent]]\nname = \"open\"\nengine = \"fake\"\nsandbox = false\n")
	d := startDaemon(t, state, "--project", proj)
	p := newPage(t, d.login)

	p.wait("see the team", `document.querySelector('#agents tr[data-agent="boxed"]') && document.querySelector('#agents tr[data-agent="open"]')`, 20*time.Second)
	if !eval[bool](p, `!!document.querySelector('#agents tr[data-agent="open"] .unsandboxed')`) {
		t.Errorf("the team table does not mark open unsandboxed: %q", eval[string](p, `document.querySelector('#agents tr[data-agent="open"]').innerText`))
	}
	if eval[bool](p, `!!document.querySelector('#agents tr[data-agent="boxed"] .unsandboxed')`) {
		t.Errorf("the team table marks the sandboxed agent unsandboxed")
	}

	p.click("open the unsandboxed agent", `#agents tr[data-agent="open"] a`)
	p.wait("its view marks it", `document.querySelector('#agent[data-agent="open"] #agent-sandbox .unsandboxed')`, 10*time.Second)
	p.shot("unsandboxed")
	p.click("open the sandboxed agent", `#agents tr[data-agent="boxed"] a`)
	p.wait("its view", `document.querySelector('#agent[data-agent="boxed"] #agent-sandbox')`, 10*time.Second)
	if s := eval[string](p, `document.querySelector("#agent-sandbox").innerText`); s != "sandboxed" ||
		eval[bool](p, `!!document.querySelector("#agent-sandbox .unsandboxed")`) {
		t.Errorf("the sandboxed agent's view shows %q", s)
	}
}
