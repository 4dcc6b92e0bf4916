package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrowserAttemptCompare drives the Attempts view on the attempt
// demo: an attempt started from the form (the task typed, three agents
// ticked), its compare view once done (fixer, breaker, idle ranked 1, 2,
// 3, fixer's check output shown), fixer's diff one click away in the
// Changes view, the winner merged from the compare view, the others
// discarded (their worktrees reset).
func TestBrowserAttemptCompare(t *testing.T) {
	proj := attemptDemo(t, "")
	state := t.TempDir()
	d := startDaemon(t, state, "--project", proj)
	p := newPage(t, d.login)
	p.wait("see the team", `document.querySelector('#agents tr[data-agent="fixer"]')`, 20*time.Second)

	p.click("open attempts", "#tab-attempts")
	p.wait("the worktree agents", `document.querySelectorAll('#attempt-agents input[type=checkbox]').length === 3`, 20*time.Second)
	eval[bool](p, `(() => { const t = document.querySelector('#attempt-task'); t.value = 'make sh test.sh pass'; t.dispatchEvent(new Event('input', {bubbles: true})); return true })()`)
	for _, a := range []string{"fixer", "breaker", "idle"} {
		p.click("tick "+a, `#attempt-agents input[data-agent="`+a+`"]`)
	}
	p.wait("start enabled", `!document.querySelector('#attempt-start').disabled`, 5*time.Second)
	p.click("start", "#attempt-start")
	p.wait("the attempt done", `document.querySelector('#attempt-compare[data-state="done"]')`, 60*time.Second)
	ranks := eval[string](p, `[...document.querySelectorAll('#attempt-members tbody tr')].map(r => r.dataset.agent + ":" + r.dataset.rank).join(" ")`)
	if ranks != "fixer:1 breaker:2 idle:3" {
		t.Fatalf("ranks shown = %q", ranks)
	}
	if s := eval[string](p, `document.querySelector('#attempt-members tr[data-agent="fixer"]').innerText`); !strings.Contains(s, "passed") || !strings.Contains(s, "+1 −1") {
		t.Errorf("fixer's row = %q, want passed, +1 −1", s)
	}
	if s := eval[string](p, `document.querySelector('.attempt-output[data-agent="fixer"] pre').innerText`); !strings.Contains(s, "2 + 2 = 4") {
		t.Errorf("fixer's check output = %q", s)
	}
	if s := eval[string](p, `document.querySelector('.attempt-output[data-agent="idle"] summary').innerText`); !strings.Contains(s, "changed nothing") {
		t.Errorf("idle's reason = %q", s)
	}
	p.shot("attempt-compare")

	// fixer's diff, one click away.
	p.click("fixer's diff", `#attempt-members tr[data-agent="fixer"] a.attempt-diff`)
	p.wait("fixer's diff in Changes", `document.querySelector('#diff-view[data-agent="fixer"] .file-diff[data-file="add.sh"]')`, 20*time.Second)
	eval[bool](p, `(history.back(), true)`)
	p.wait("the compare view again", `document.querySelector('#attempt-compare[data-state="done"]')`, 20*time.Second)

	p.click("merge the winner", "#attempt-merge")
	p.wait("merged", `document.querySelector('#attempt-note')?.innerText.includes('merged troupe/fixer')`, 20*time.Second)
	if b, _ := os.ReadFile(filepath.Join(proj, "add.sh")); !strings.Contains(string(b), "$1 + $2") {
		t.Fatalf("after the merge, add.sh = %q", b)
	}
	p.click("discard the others", "#attempt-discard")
	p.click("confirm", "#attempt-discard-yes")
	p.wait("discarded", `document.querySelector('#attempt-note')?.innerText.includes('reset the worktrees of breaker, idle')`, 20*time.Second)
	p.wait("listed discarded", `document.querySelector('#attempt-list tr[data-attempt="1"]')?.innerText.includes('discarded')`, 20*time.Second)
}
