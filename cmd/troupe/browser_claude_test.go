package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserClaudeTranscript: the web UI on a Claude Code agent (the
// pinned CLI, against the scripted model on 127.0.0.1): an ask from the
// composer whose turn calls troupe's ask_agent shows in the agent's
// transcript as a folded tool call with its input and result, the final
// text, usage; a Bash call waits on the person, shows in "needs you" and
// in the transcript with Allow/Deny, and Allow lets it run.
func TestBrowserClaudeTranscript(t *testing.T) {
	r := newClaudeRig(t, "2m")
	p := newPage(t, r.d.login)
	p.wait("see the team", `document.querySelector('#agents tr[data-agent="claude"]')`, 20*time.Second)
	p.click("open the claude agent", `#agents tr[data-agent="claude"] a`)
	p.wait("its view", `document.querySelector('#agent[data-agent="claude"]')`, 10*time.Second)

	// Asked from the conversation's composer; the transcript is followed
	// in the agent's view.
	p.click("to the conversation", "#tab-conversation")
	p.choose("#to", "claude")
	p.do("ask claude", chromedp.SendKeys("#text", `[[tool:mcp__troupe__ask_agent {"to":"helper","question":"is the build green?"}]]`+kb.Enter))
	p.wait("the answer card", `[...document.querySelectorAll('#cards li[data-state="answered"] .answer')].some(e => e.innerText.includes("helper knows: is the build green?"))`, 90*time.Second)
	p.click("back to claude", `#agents tr[data-agent="claude"] a`)
	const call = `document.querySelector('#transcript details.tool[data-tool="mcp__troupe__ask_agent"]')`
	p.wait("the tool call, folded", call+` && !`+call+`.open`, 20*time.Second)
	eval[bool](p, "("+call+`.querySelector("summary").click(), true)`)
	p.wait("its input and result", call+`.open && `+call+`.innerText.includes("is the build green?") && `+call+`.innerText.includes("helper knows")`, 10*time.Second)
	p.wait("the final text", `[...document.querySelectorAll("#transcript .turn.ended .item.text")].some(e => e.innerText.includes("TOOL_RESULT_SEEN"))`, 20*time.Second)
	p.wait("usage", `[...document.querySelectorAll("#transcript .turn.ended .usage")].some(e => e.innerText.includes(" out"))`, 20*time.Second)

	// A Bash call waits on the person: Allow in the transcript.
	p.click("to the conversation", "#tab-conversation")
	p.do("ask for a Bash call", chromedp.SendKeys("#text", `[[tool:Bash {"command":"touch allowed.txt && echo wrote allowed.txt"}]]`+kb.Enter))
	p.wait("the count in the title", `document.title.startsWith("(1)")`, 60*time.Second)
	p.click("back to claude", `#agents tr[data-agent="claude"] a`)
	p.wait("the request in the transcript", `document.querySelector("#transcript .permission.perm-pending button.allow")`, 20*time.Second)
	if st := eval[string](p, `document.querySelector("#agent-state").innerText`); st == "" {
		t.Error("no state shown")
	}
	p.click("allow it", "#transcript .permission.perm-pending button.allow")
	p.wait("it ran", `[...document.querySelectorAll("#transcript .item.text")].some(e => e.innerText.includes("wrote allowed.txt"))`, 60*time.Second)
	if !fileExists(filepath.Join(r.proj, "allowed.txt")) {
		t.Error("the allowed Bash call made no file")
	}
}
