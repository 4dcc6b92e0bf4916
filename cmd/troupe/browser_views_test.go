package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/troupe-dev/troupe/internal/claudesessions"
	"github.com/troupe-dev/troupe/internal/client"
)

// copyFixtureSession copies one of internal/claudesessions' recorded
// transcripts into a Claude config folder's projects/ tree; cwd, when not
// "", replaces the folder it was recorded in (a session handed to an agent
// must have started in the agent's folder).
func copyFixtureSession(t *testing.T, claudeDir, id, cwd string) {
	t.Helper()
	const src = "../../internal/claudesessions/testdata/transcripts/print-mode/-home-lab-a-work-fixproj"
	b, err := os.ReadFile(filepath.Join(src, id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if cwd != "" {
		q, _ := json.Marshal(cwd)
		b = regexp.MustCompile(`"cwd": ?"[^"]*"`).ReplaceAll(b, []byte(`"cwd":`+string(q)))
	}
	dst := filepath.Join(claudeDir, "projects", "-home-lab-a-work-fixproj")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, id+".jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// typeKeys types text into the focused element as a keyboard does: one
// keyDown carrying the text (the browser's keydown, keypress and input),
// then keyUp, per character. (chromedp's KeyEvent sends the text in a
// separate char event, which xterm.js reads as a second key press.)
func typeKeys(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, r := range text {
			key, code := string(r), int64(r)
			if r == '\r' {
				key, code = "Enter", 13
			} else if r >= 'a' && r <= 'z' {
				code = int64(r - 'a' + 'A')
			}
			down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: key, Text: string(r), UnmodifiedText: string(r), WindowsVirtualKeyCode: code, NativeVirtualKeyCode: code}
			up := down
			up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
			for _, ev := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TestBrowserChangesTerminalSessions drives the Changes, Terminal and
// Claude sessions views against one daemon: a worktree agent's diff
// (files folded with their +/- counts) and Merge, refused while the
// project has uncommitted changes, then done; the files a turn's edit
// tool calls name, in the agent view; a terminal agent attached in
// xterm.js, typed into, its echo on the screen, and the screen redrawn
// after the connection drops; the clear state of an agent that is not
// terminal-mode; the machine's Claude sessions listed from a fake config
// folder, filtered by the search box, one opened with its transcript and
// the resume and fork commands.
func TestBrowserChangesTerminalSessions(t *testing.T) {
	state := t.TempDir()
	script := filepath.Join(t.TempDir(), "repl.sh")
	if err := os.WriteFile(script, []byte(termREPL), 0o755); err != nil {
		t.Fatal(err)
	}
	proj := gitProject(t, fmt.Sprintf(`
[[agent]]
name = "a"
engine = "fake"
workspace = "worktree"

[[agent]]
name = "repl"
engine = "terminal"
command = "/bin/sh"
args = [%q]

[agent.terminal]
idle = "repl>"
busy = "working..."

[[agent]]
name = "cc"
engine = "claude"
`, script))
	claudeDir := t.TempDir()
	const sessA, sessB = "aaaaaaaa-bbbb-4ccc-8ddd-000000000001", "4153f123-0ed3-4769-886f-bb478a784dd9"
	copyFixtureSession(t, claudeDir, sessA, proj) // handed off to cc below
	copyFixtureSession(t, claudeDir, sessB, "")
	// Session B is live: a registry file names this test's process, with
	// its start time (C8's check).
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	start, err := claudesessions.ProcStartTime(stat)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(claudeDir, "sessions"), 0o755)
	reg := fmt.Sprintf(`{"pid":%d,"sessionId":%q,"cwd":"/home/lab-a/work/fixproj","startedAt":1,"procStart":%q,"kind":"print","status":"busy"}`, os.Getpid(), sessB, start)
	if err := os.WriteFile(filepath.Join(claudeDir, "sessions", fmt.Sprintf("%d.json", os.Getpid())), []byte(reg), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, state, "--project", proj, "--claude-dir", claudeDir)
	cl, err := client.FromStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's worktree, made when its session starts; the test writes
	// in it as the agent would.
	req, err := cl.Ask(ctx, info.ID, "a", "!cwd", 0)
	if err != nil {
		t.Fatal(err)
	}
	tree := strings.TrimSpace(req.Answer)
	if i := strings.LastIndex(tree, " "); i >= 0 {
		tree = tree[i+1:]
	}
	if err := os.WriteFile(filepath.Join(tree, "notes.txt"), []byte("first note\nsecond note\n"), 0o644); err != nil {
		t.Fatalf("write in the worktree %q (answer %q): %v", tree, req.Answer, err)
	}
	if err := os.WriteFile(filepath.Join(tree, "README"), []byte("hello from a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var big strings.Builder
	for i := range 400 {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(tree, "big.txt"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	p := newPage(t, d.login)
	p.wait("see the team", `document.querySelector('#agents tr[data-agent="a"]')`, 20*time.Second)

	// Changes: the worktree listed, the diff per file with its counts.
	p.click("open changes", "#tab-changes")
	p.click("open a's changes", `#worktrees tr[data-agent="a"] a`)
	p.wait("a's diff", `document.querySelector('#diff-view .file-diff[data-file="notes.txt"]')`, 20*time.Second)
	if s := eval[string](p, `document.querySelector('#worktrees tr[data-agent="a"]').innerText`); !strings.Contains(s, "troupe/a") || !strings.Contains(s, "uncommitted: 3 file(s)") {
		t.Errorf("a's worktree row = %q, want its branch and 3 uncommitted files", s)
	}
	if s := eval[string](p, `document.querySelector('.file-diff[data-file="notes.txt"] summary').innerText`); !strings.Contains(s, "+2") || !strings.Contains(s, "−0") {
		t.Errorf("notes.txt's summary = %q, want +2 −0", s)
	}
	if s := eval[string](p, `document.querySelector('.file-diff[data-file="README"] summary').innerText`); !strings.Contains(s, "+1") || !strings.Contains(s, "−1") {
		t.Errorf("README's summary = %q, want +1 −1", s)
	}
	if s := eval[string](p, `[...document.querySelectorAll('.file-diff[data-file="README"] .dl.add')].map(e => e.innerText).join("|")`); !strings.Contains(s, "+hello from a") {
		t.Errorf("README's added lines = %q", s)
	}
	// A long file's diff is clipped until "show all".
	const bigLines = `document.querySelectorAll('.file-diff[data-file="big.txt"] .dl.add').length`
	if n := eval[int](p, bigLines); n == 0 || n >= 400 {
		t.Errorf("big.txt shows %d added lines, want a clipped part of 400", n)
	}
	p.click("show all of big.txt", `.file-diff[data-file="big.txt"] button.show-all`)
	p.wait("all of big.txt", bigLines+` === 400`, 5*time.Second)
	p.click("fold README", `.file-diff[data-file="README"] summary`)
	if open := eval[bool](p, `document.querySelector('.file-diff[data-file="README"]').open`); open {
		t.Error("a click did not fold README's diff")
	}
	p.shot("changes")
	// Merge refused while the project's tree is dirty, as the daemon says.
	if err := os.WriteFile(filepath.Join(proj, "README"), []byte("the person's edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.expectConsole("status of 409 (Conflict)") // the refused merge's answer
	p.click("merge", "#merge")
	p.wait("the refusal", `document.querySelector("#merge-result.err")?.innerText.includes("uncommitted changes")`, 20*time.Second)
	gitIn(t, proj, "checkout", "--", "README")
	p.click("merge again", "#merge")
	p.wait("merged", `document.querySelector("#merge-result.note")?.innerText.includes("merged troupe/a into main")`, 20*time.Second)
	if b, _ := os.ReadFile(filepath.Join(proj, "notes.txt")); string(b) != "first note\nsecond note\n" {
		t.Errorf("after the merge notes.txt = %q", b)
	}
	// Tool configuration: shown first and flagged; Merge asks, listing it,
	// and only the confirmation sends it. (The diff read again after the
	// merge, empty, first: it must not land after the refresh below.)
	p.wait("the merged diff", `document.querySelector("#diff-summary")?.innerText.startsWith("0 file(s)")`, 20*time.Second)
	if err := os.MkdirAll(filepath.Join(tree, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, ".claude", "settings.json"), []byte(`{"permissions":{"allow":["Bash"]}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "-first-by-name.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.click("refresh the diff", "#diff-refresh")
	p.wait("the config file flagged", `document.querySelector('.file-diff.config[data-file=".claude/settings.json"] .config-flag')`, 20*time.Second)
	if first := eval[string](p, `document.querySelector('#diff-view .file-diff').dataset.file`); first != ".claude/settings.json" {
		t.Errorf("first file of the diff = %q, want the tool configuration", first)
	}
	p.click("merge with config", "#merge")
	p.wait("the confirmation", `document.querySelector("#merge-confirm #merge-config")?.innerText.includes(".claude/settings.json")`, 20*time.Second)
	if _, err := os.Stat(filepath.Join(proj, ".claude", "settings.json")); err == nil {
		t.Fatal("Merge brought the tool configuration before the confirmation")
	}
	p.click("confirm", "#merge-confirm-yes")
	p.wait("merged with config", `document.querySelector("#merge-result.note")?.innerText.includes("tool configuration merged: .claude/settings.json")`, 20*time.Second)
	if _, err := os.Stat(filepath.Join(proj, ".claude", "settings.json")); err != nil {
		t.Errorf("after the confirmed merge: %v", err)
	}

	// The files a turn's edit tool calls name show on the turn.
	if _, err := cl.Send(ctx, info.ID, "a", `!tool Edit {"file_path":"src/app.go","old_string":"a","new_string":"b"}`+"\n!say edited"); err != nil {
		t.Fatal(err)
	}
	p.click("open a", `#agents tr[data-agent="a"] a`)
	p.wait("the turn's files", `[...document.querySelectorAll("#transcript .turn-files")].some(e => e.innerText.includes("src/app.go"))`, 20*time.Second)

	// Terminal: a non-terminal agent says so; the REPL attaches, echoes
	// what is typed, and a dropped connection redraws the screen.
	p.click("open terminal", "#tab-terminal")
	p.click("pick a", `#terminal a[data-agent="repl"]`)
	p.wait("attached", `document.querySelector("#term-state")?.dataset.state === "attached"`, 20*time.Second)
	const screen = `(document.querySelector("#term .xterm-rows")?.innerText || "")`
	p.wait("the prompt on the screen", screen+`.includes("repl>")`, 20*time.Second)
	eval[bool](p, `(window.troupe.terminal.term.focus(), true)`)
	p.do("type into the terminal", typeKeys("hello term\r"))
	p.wait("the echo", screen+`.includes("REPL HEARD: HELLO TERM")`, 20*time.Second)
	if n := eval[int](p, `document.adoptedStyleSheets.reduce((n, s) => n + s.cssRules.length, 0)`); n == 0 {
		t.Error("xterm's styles were not mirrored into a constructed sheet (the CSP refuses its <style> elements)")
	}
	if n := eval[int](p, `document.querySelectorAll("#term style").length`); n != 0 {
		t.Errorf("xterm made %d <style> elements in the page (the CSP refuses them: a violation each)", n)
	}
	p.shot("terminal")
	// The program is told the view's size, and follows when the box changes.
	sizeIs := func() string {
		return `"size is " + window.troupe.terminal.term.rows + " " + window.troupe.terminal.term.cols`
	}
	p.do("ask the size", typeKeys("size\r"))
	p.wait("the program has the view's size", screen+`.includes(`+sizeIs()+`)`, 20*time.Second)
	before := eval[string](p, sizeIs())
	eval[bool](p, `(document.querySelector("#term").style.height = "220px", true)`)
	p.wait("the terminal refitted", sizeIs()+` !== `+fmt.Sprintf("%q", before), 10*time.Second)
	p.do("ask the size again", typeKeys("size\r"))
	p.wait("the program has the new size", screen+`.includes(`+sizeIs()+`)`, 20*time.Second)
	eval[bool](p, `(window.troupe.terminal.term.reset(), window.troupe.terminal.drop(), true)`)
	p.wait("reattached with the screen", `document.querySelector("#term-state")?.dataset.state === "attached" && `+screen+`.includes("REPL HEARD: HELLO TERM")`, 20*time.Second)
	// The program ends (EOF on its input): the view says so and waits for
	// the person; Reconnect starts the agent's session again.
	eval[bool](p, `(window.troupe.terminal.term.input("\x04"), true)`)
	p.wait("the end said", `document.querySelector("#term-state")?.dataset.state === "ended" && document.querySelector("#term-state").innerText.includes("the program ended")`, 20*time.Second)
	p.click("reconnect", "#term-reconnect")
	p.wait("attached again", `document.querySelector("#term-state")?.dataset.state === "attached"`, 20*time.Second)
	p.wait("a new prompt", screen+`.includes("repl>")`, 20*time.Second)
	eval[bool](p, `(location.hash = location.hash.replace(/\/terminal\/repl$/, "/terminal/a"), true)`)
	p.wait("not terminal-mode", `document.querySelector("#term-not-terminal")?.innerText.includes("structured mode")`, 10*time.Second)

	// Claude sessions: both listed; the search keeps one; its detail.
	p.click("open sessions", "#tab-sessions")
	p.wait("two sessions", `document.querySelectorAll("#session-list li[data-session]").length === 2`, 20*time.Second)
	p.do("search", chromedp.SendKeys("#sessions-q", "aaaaaaaa-bbbb"))
	p.wait("one session", `(l => l.length === 1 && l[0].dataset.session === "`+sessA+`")(document.querySelectorAll("#session-list li[data-session]"))`, 10*time.Second)
	p.click("open it", `#session-list li[data-session="`+sessA+`"] a`)
	p.wait("the resume command", `document.querySelector("#cmd-resume")?.innerText === "troupe resume `+sessA+`"`, 10*time.Second)
	p.wait("the fork command", `document.querySelector("#cmd-fork")?.innerText === "troupe fork `+sessA+`"`, 10*time.Second)
	p.wait("its transcript", `[...document.querySelectorAll("#session-transcript li")].some(e => e.innerText.includes("hello"))`, 10*time.Second)
	p.shot("sessions")
	// Hand-off to the project's Claude agent: the session is the agent's.
	p.click("hand off", `#handoff button[type="submit"]`)
	p.wait("handed off", `document.querySelector("#handoff-result.note")?.innerText.includes("cc's next session resumes")`, 10*time.Second)
	p.wait("the session now the agent's", `document.querySelector("#session .facts")?.innerText.includes("troupe's cc")`, 10*time.Second)
	// The live session: observed (its transcript followed as it grows),
	// forked, never resumed nor handed off (C9).
	eval[bool](p, `(s => { s.value = ""; s.dispatchEvent(new Event("input", {bubbles: true})); return true })(document.querySelector("#sessions-q"))`)
	p.click("live only", "#sessions-live")
	p.wait("only the live session", `(l => l.length === 1 && l[0].dataset.session === "`+sessB+`" && l[0].innerText.includes("live · busy"))(document.querySelectorAll("#session-list li[data-session]"))`, 10*time.Second)
	p.click("open it", `#session-list li[data-session="`+sessB+`"] a`)
	p.wait("resume refused, fork offered", `document.querySelector("#resume-refused")?.innerText.includes("never resumed") && !document.querySelector("#cmd-resume") && document.querySelector("#cmd-fork")?.innerText === "troupe fork `+sessB+`"`, 10*time.Second)
	p.wait("no hand-off", `document.querySelector("#handoff-refused") && !document.querySelector("#handoff")`, 5*time.Second)
	p.wait("observing", `document.querySelector("#transcript-state")?.innerText.includes("following the live session") && document.querySelectorAll("#session-transcript li").length > 0`, 10*time.Second)
	tr := filepath.Join(claudeDir, "projects", "-home-lab-a-work-fixproj", sessB+".jsonl")
	f, err := os.OpenFile(tr, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"type":"user","message":{"role":"user","content":"a line written while observed"},"uuid":"0e0e0e0e-0000-4000-8000-000000000001","timestamp":%q,"sessionId":%q,"cwd":"/home/lab-a/work/fixproj"}`+"\n", time.Now().UTC().Format(time.RFC3339Nano), sessB)
	f.Close()
	p.wait("the new line shown", `[...document.querySelectorAll("#session-transcript li")].some(e => e.innerText.includes("a line written while observed"))`, 20*time.Second)
}
