package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrowserCheckpointsRealDaemon drives the agent view's checkpoints
// (C18) against a real daemon: two turns of a fake agent write a file
// with a shell command in a git project; each turn's card shows its own
// checkpoint and the journal's line of it; Files shows the stat and the
// patch; Rewind to here, confirmed, puts the file back as the first turn
// left it, says how to undo, and the rewind's own checkpoint is listed.
func TestBrowserCheckpointsRealDaemon(t *testing.T) {
	state := t.TempDir()
	proj := gitProject(t, `
[[agent]]
name = "a"
engine = "fake"
allowed_tools = ["Bash"]
`)
	ctx, d, cl, info := serveProject(t, state, proj, nil, 2*time.Minute)
	for _, sh := range []string{`printf 'one\n' > notes.txt`, `printf 'two\nthree\n' > notes.txt`} {
		if r, err := cl.Ask(ctx, info.ID, "a", "!sh "+sh, 0); err != nil || !strings.Contains(r.Answer, "exit 0") {
			t.Fatalf("ask a to run %s: %+v, %v", sh, r, err)
		}
	}
	p := newPage(t, d.login)
	p.wait("see the team", `document.querySelector('#agents tr[data-agent="a"]')`, 20*time.Second)
	p.click("open a", `#agents tr[data-agent="a"] a`)
	p.wait("two turns' checkpoints", `document.querySelectorAll('#transcript .turn > .checkpoint').length === 2`, 20*time.Second)
	const first, last = `#transcript .turn:first-child > .checkpoint`, `#transcript .turn:last-child > .checkpoint`
	if s := eval[string](p, `document.querySelector("`+first+`").innerText`); !strings.Contains(s, "checkpoint 1: 1 file changed +1 −0") {
		t.Errorf("the first turn's checkpoint says %q", s)
	}
	if s := eval[string](p, `document.querySelector("`+last+`").innerText`); !strings.Contains(s, "checkpoint 2: 1 file changed +2 −1") {
		t.Errorf("the second turn's checkpoint says %q", s)
	}
	if s := eval[string](p, `document.querySelector("#transcript .turn:first-child .item.checkpoint-note")?.innerText || ""`); !strings.Contains(s, "checkpoint 1") {
		t.Errorf("the first turn's record of its checkpoint: %q", s)
	}

	p.click("the first turn's files", first+" .cp-files-toggle")
	p.wait("its stat", `document.querySelector("`+first+` pre.cp-stat")?.innerText.includes("notes.txt")`, 10*time.Second)
	p.click("its patch", first+" .cp-patch-toggle")
	p.wait("its patch", `[...document.querySelectorAll('`+first+` .file-diff[data-file="notes.txt"] .dl.add')].some(e => e.innerText === "+one")`, 10*time.Second)

	p.click("rewind to the first turn", first+" .cp-rewind")
	p.click("confirm", first+" .cp-rewind-yes")
	p.wait("the answer", `document.querySelector("`+first+` .cp-result.note")?.innerText === "Rewound to checkpoint 1; checkpoint 3 holds the files as they were: rewind to 3 to undo"`, 20*time.Second)
	if b, err := os.ReadFile(filepath.Join(proj, "notes.txt")); err != nil || string(b) != "one\n" {
		t.Errorf("notes.txt after the rewind = %q, %v; want the first turn's one", b, err)
	}
	p.wait("the rewind's checkpoint listed", `document.querySelector("#checkpoints .checkpoint[data-checkpoint='3']")`, 10*time.Second)
	if s := eval[string](p, `document.querySelector("#checkpoints").innerText`); !strings.Contains(s, "before rewind to 1") {
		t.Errorf("the Checkpoints list says %q, want the rewind's checkpoint", s)
	}
}
