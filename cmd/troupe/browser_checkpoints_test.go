package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/web"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// checkpointAPI stands in for the daemon's API as the agent view reads it,
// with the checkpoint routes (C18) answering from a list the test sets:
// the web UI's side of per-turn checkpoints is driven in the browser with
// checkpoints, states and refusals made to order. It serves the built UI
// as the daemon does (web.Handler, with its CSP).
type checkpointAPI struct {
	feed chan events.Event // what GET /api/events streams

	// mu guards the fields below.
	mu          sync.Mutex
	state       troupe.AgentState // agent a's, as the agents' list says
	list        []worktree.Checkpoint
	diffs       []string // the diff routes' queries, "SEQ stat" or "SEQ patch"
	rewinds     []string // the rewind routes' bodies
	conflict    string   // the next rewind is refused with it (409), once
	turns       []journal.Turn
	unavailable string                // agent b's
	many        []worktree.Checkpoint // agent c's
	seq         uint64                // the last event's number
}

const cpProject = "p1"

func (m *checkpointAPI) handler() http.Handler {
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	empty := func(w http.ResponseWriter, _ *http.Request) { js(w, 200, []any{}) }
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, api.Status{Version: "test", Projects: 1, Agents: 3})
	})
	mux.HandleFunc("GET /api/projects", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, []api.Project{{ID: cpProject, Path: "/nowhere", Name: "proj", Agents: 3, Team: "ok"}})
	})
	mux.HandleFunc("GET /api/projects/p1/agents", func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		js(w, 200, []api.Agent{
			{Project: cpProject, Name: "a", Engine: "fake", Mode: troupe.ModeStructured, State: m.state, Sandboxed: true},
			{Project: cpProject, Name: "b", Engine: "fake", Mode: troupe.ModeStructured, State: troupe.StateIdle, Sandboxed: true},
			{Project: cpProject, Name: "c", Engine: "fake", Mode: troupe.ModeStructured, State: troupe.StateIdle, Sandboxed: true},
		})
	})
	mux.HandleFunc("GET /api/projects/p1/messages", func(w http.ResponseWriter, _ *http.Request) {
		js(w, 200, api.Messages{Messages: []troupe.Message{}})
	})
	mux.HandleFunc("GET /api/projects/p1/tasks", empty)
	mux.HandleFunc("GET /api/permissions", empty)
	mux.HandleFunc("GET /api/team-changes", empty)
	mux.HandleFunc("GET /api/projects/p1/agents/{agent}/log", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		log := api.AgentLog{Agent: troupe.AgentID(r.PathValue("agent")), Turns: []journal.Turn{}}
		if r.PathValue("agent") == "a" {
			log.Turns = m.turns
		}
		js(w, 200, log)
	})
	mux.HandleFunc("GET /api/projects/p1/agents/{agent}/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch r.PathValue("agent") {
		case "b":
			js(w, 200, map[string]any{"checkpoints": []worktree.Checkpoint{}, "unavailable": m.unavailable})
			return
		case "c":
			js(w, 200, map[string]any{"checkpoints": m.many})
			return
		}
		js(w, 200, map[string]any{"checkpoints": m.list})
	})
	mux.HandleFunc("GET /api/projects/p1/agents/a/checkpoints/{seq}/diff", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		seq := r.PathValue("seq")
		if r.URL.Query().Get("stat") == "1" {
			m.diffs = append(m.diffs, seq+" stat")
			js(w, 200, map[string]any{"diff": " notes.txt  | 3 ++-\n rtl\u202e.txt | 1 +\n 2 files changed, 3 insertions(+), 1 deletion(-)\n", "cut": false, "tree": "t" + seq})
			return
		}
		m.diffs = append(m.diffs, seq+" patch")
		js(w, 200, map[string]any{"diff": "diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,2 @@\n-old\n+new\n+more\n" +
			"diff --git a/rtl\u202e.txt b/rtl\u202e.txt\n--- /dev/null\n+++ b/rtl\u202e.txt\n@@ -0,0 +1 @@\n+x\n", "cut": false, "tree": "t" + seq})
	})
	mux.HandleFunc("POST /api/projects/p1/agents/a/rewind", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		var body struct {
			Seq int64 `json:"seq"`
		}
		raw, err := io.ReadAll(r.Body)
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			js(w, 400, api.Error{Error: "body: " + err.Error(), Code: "invalid"})
			return
		}
		m.rewinds = append(m.rewinds, string(raw))
		if m.conflict != "" {
			msg := m.conflict
			m.conflict = ""
			js(w, 409, api.Error{Error: msg, Code: "conflict"})
			return
		}
		before := worktree.Checkpoint{Seq: m.list[len(m.list)-1].Seq + 1, Commit: "c", At: time.Now().UTC(), Reason: fmt.Sprintf("rewind to %d", body.Seq), Files: 1, Added: 1}
		m.list = append(m.list, before)
		js(w, 200, map[string]any{"before": before, "seq": body.Seq})
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case ev := <-m.feed:
				w.Write(ev.SSE())
				w.(http.Flusher).Flush()
			}
		}
	})
	mux.HandleFunc("GET /favicon.svg", api.ServeFavicon)
	mux.Handle("/", web.Handler())
	return mux
}

// send streams one event of agent a to the page.
func (m *checkpointAPI) send(t *testing.T, typ events.Type, data any) {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.seq++
	ev := events.Event{Seq: m.seq, Time: time.Now(), Type: typ, Project: cpProject, Agent: "a", Data: b}
	m.mu.Unlock()
	select {
	case m.feed <- ev:
	case <-time.After(20 * time.Second):
		t.Fatalf("the page did not read event %s", typ)
	}
}

func (m *checkpointAPI) locked(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

// TestBrowserCheckpoints drives the agent view's checkpoints (C18) in
// headless Chromium: each turn card shows its own checkpoint (matched by
// turn id) with "N files changed +A −D"; Files reads git's --stat, then
// the patch; Rewind to here asks first, sends the checkpoint's number and
// says how to undo it; the daemon's refusal (409) is shown as it says it;
// the button is disabled while the agent is busy; the checkpoints of no
// turn shown (a reset's, an older turn's, a rewind's) are listed newest
// first, 50 at a time; the list is read again when a turn ends; a
// workspace without checkpoints says why, once.
func TestBrowserCheckpoints(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	turn := func(seq int64, id string, ago time.Duration, evs ...journal.Event) journal.Turn {
		evs = append([]journal.Event{}, evs...) // a list, as the journal gives it, never null
		return journal.Turn{Seq: seq, Project: cpProject, Agent: "a", ID: troupe.TurnID(id), StartedAt: now.Add(-ago),
			EndedAt: now.Add(-ago + time.Second), DurationMS: 1000, Messages: []journal.Message{}, Events: evs}
	}
	m := &checkpointAPI{
		feed:  make(chan events.Event),
		state: troupe.StateIdle,
		turns: []journal.Turn{
			turn(1, "t-first", 2*time.Hour),
			turn(2, "t-second", time.Hour, journal.Event{At: now, Kind: journal.KindCheckpoint, Text: "checkpoint 3: 1 file changed, +3 −0"}),
		},
		list: []worktree.Checkpoint{
			{Seq: 1, Commit: "c1", At: now.Add(-3 * time.Hour), Reason: "turn", Turn: "t-older", Files: 5, Added: 50, Deleted: 5},
			{Seq: 2, Commit: "c2", At: now.Add(-2 * time.Hour), Reason: "turn", Turn: "t-first", Files: 2, Added: 10, Deleted: 1},
			{Seq: 3, Commit: "c3", At: now.Add(-time.Hour), Reason: "turn", Turn: "t-second", Files: 1, Added: 3,
				Skipped: 3, SkippedNames: []string{"huge.bin", "evil\u202etxt.exe"}},
			{Seq: 4, Commit: "c4", At: now.Add(-time.Minute), Reason: "reset"},
		},
		unavailable: "not a git repository: no checkpoints (run git init in the project's folder to have them)",
	}
	for i := range 60 {
		m.many = append(m.many, worktree.Checkpoint{Seq: int64(i + 1), Commit: "m", At: now.Add(time.Duration(i-60) * time.Minute), Reason: "reset"})
	}
	srv := httptest.NewServer(m.handler())
	t.Cleanup(srv.Close)
	p := newPage(t, srv.URL+"/#/p/"+cpProject+"/agent/a")

	// Each turn card has its own checkpoint.
	const first, second = `.turn[data-turn="t-first"] .checkpoint`, `.turn[data-turn="t-second"] .checkpoint`
	p.wait("t-first's checkpoint", fmt.Sprintf(`document.querySelector(%q)?.dataset.checkpoint === "2"`, first), 20*time.Second)
	if s := eval[string](p, fmt.Sprintf(`document.querySelector(%q).innerText`, first)); !strings.Contains(s, "2 files changed +10 −1") {
		t.Errorf("t-first's checkpoint says %q, want 2 files changed +10 −1", s)
	}
	if s := eval[string](p, fmt.Sprintf(`document.querySelector(%q).innerText`, second)); !strings.Contains(s, "1 file changed +3 −0") ||
		!strings.Contains(s, `3 files too large, not kept: huge.bin, evil\u{202e}txt.exe and 1 more`) {
		t.Errorf("t-second's checkpoint says %q, want its change and its skipped files (an invisible character shown)", s)
	}
	if n := eval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, second)); n != 1 {
		t.Errorf("t-second's card has %d checkpoint controls, want 1", n)
	}
	// The turn's record of its checkpoint is in its activity.
	if s := eval[string](p, `document.querySelector('.turn[data-turn="t-second"] .item.checkpoint-note')?.innerText || ""`); !strings.Contains(s, "checkpoint 3: 1 file changed") {
		t.Errorf("t-second's activity shows its checkpoint as %q", s)
	}
	// The others, newest first: the reset's, then the older turn's.
	rows := `[...document.querySelectorAll('#checkpoints .checkpoint')].map(e => e.dataset.checkpoint).join(",")`
	if s := eval[string](p, rows); s != "4,1" {
		t.Errorf("the Checkpoints list holds %q, want 4,1 (no turn card shows them)", s)
	}
	if s := eval[string](p, `document.querySelector('#checkpoints').innerText`); !strings.Contains(s, "before reset") || !strings.Contains(s, "end of turn t-older") {
		t.Errorf("the Checkpoints list says %q, want what each was made for", s)
	}
	if n := eval[int](p, `document.querySelectorAll('#agent [style]').length`); n != 0 {
		t.Errorf("%d elements of the agent view have inline styles (the CSP forbids them)", n)
	}

	// Files: git's --stat, then the whole patch.
	p.click("t-first's files", first+" .cp-files-toggle")
	p.wait("the stat", fmt.Sprintf(`document.querySelector(%q)?.innerText.includes("2 files changed, 3 insertions")`, first+" pre.cp-stat"), 10*time.Second)
	if s := eval[string](p, fmt.Sprintf(`document.querySelector(%q).innerText`, first+" pre.cp-stat")); !strings.Contains(s, `rtl\u{202e}.txt`) {
		t.Errorf("the stat shows %q, want the invisible character shown", s)
	}
	p.click("the whole patch", first+" .cp-patch-toggle")
	p.wait("the patch", fmt.Sprintf(`document.querySelector(%q)`, first+` .file-diff[data-file="notes.txt"]`), 10*time.Second)
	if s := eval[string](p, fmt.Sprintf(`document.querySelector(%q).innerText`, first+` .file-diff summary`)); !strings.Contains(s, "+2") || !strings.Contains(s, "−1") {
		t.Errorf("the patch's file says %q, want +2 −1", s)
	}
	if s := eval[string](p, fmt.Sprintf(`document.querySelector(%q).innerText`, first+" .file-diff[data-file=\"rtl\u202e.txt\"] summary")); !strings.Contains(s, `rtl\u{202e}.txt +1`) {
		t.Errorf("the patch's second file says %q, want its name with the invisible character shown", s)
	}
	m.locked(func() {
		if got := strings.Join(m.diffs, ","); got != "2 stat,2 patch" {
			t.Errorf("diffs read: %q, want checkpoint 2's stat then its patch", got)
		}
	})

	// Rewind asks first: cancelled, nothing is sent.
	p.click("rewind t-first", first+" .cp-rewind")
	p.wait("the question", fmt.Sprintf(`document.querySelector(%q)?.innerText.includes("Put a's files back as they were at the end of this turn? A checkpoint of the present is made first, so this can be undone.")`, first+" .cp-confirm"), 5*time.Second)
	p.click("cancel", first+" .cp-rewind-no")
	p.wait("no question", fmt.Sprintf(`!document.querySelector(%q)`, first+" .cp-confirm"), 5*time.Second)
	m.locked(func() {
		if len(m.rewinds) != 0 {
			t.Errorf("a cancelled rewind was sent: %v", m.rewinds)
		}
	})
	// Confirmed: the checkpoint's number is sent, the answer says how to
	// undo, and the list read again shows the checkpoint made first.
	p.click("rewind t-first", first+" .cp-rewind")
	p.click("confirm", first+" .cp-rewind-yes")
	p.wait("the answer", fmt.Sprintf(`document.querySelector(%q)?.innerText === "Rewound to checkpoint 2; checkpoint 5 holds the files as they were: rewind to 5 to undo"`, first+" .cp-result.note"), 10*time.Second)
	p.wait("the rewind's checkpoint listed first", rows+` === "5,4,1"`, 10*time.Second)
	if s := eval[string](p, `document.querySelector('#checkpoints .checkpoint-list li').innerText`); !strings.Contains(s, "before rewind to 2") {
		t.Errorf("the newest listed checkpoint says %q, want before rewind to 2", s)
	}
	m.locked(func() {
		if got := strings.Join(m.rewinds, ","); got != `{"seq":2}` {
			t.Errorf("rewind bodies: %s, want {\"seq\":2}", got)
		}
	})

	// The daemon's refusal is shown as it says it.
	const refusal = "agent a is in a turn: rewind when it is idle (troupe interrupt a stops it)"
	p.expectConsole("status of 409 (Conflict)") // its answer
	m.locked(func() { m.conflict = refusal })
	p.click("rewind t-second", second+" .cp-rewind")
	p.click("confirm", second+" .cp-rewind-yes")
	p.wait("the refusal", fmt.Sprintf(`document.querySelector(%q)?.innerText === %q`, second+" .cp-result.err", refusal), 10*time.Second)

	// A turn ends: its checkpoint, read again (no other read is pending:
	// the refused rewind read the list before saying so), is on its card.
	m.send(t, events.TypeTurnStarted, events.TurnStarted{Turn: "t-third", Messages: []int64{}})
	p.wait("the live turn", `document.querySelector('.turn[data-turn="t-third"]')`, 10*time.Second)
	m.locked(func() {
		m.list = append(m.list, worktree.Checkpoint{Seq: 6, Commit: "c6", At: time.Now().UTC(), Reason: "turn", Turn: "t-third", Files: 7, Added: 70, Deleted: 7})
	})
	m.send(t, events.TypeTurnEnded, events.TurnEnded{Turn: "t-third"})
	p.wait("t-third's checkpoint", `document.querySelector('.turn[data-turn="t-third"] .checkpoint')?.innerText.includes("7 files changed +70 −7")`, 10*time.Second)

	// Busy: no rewind offered; idle again: offered.
	p.wait("rewind offered while idle", fmt.Sprintf(`!document.querySelector(%q).disabled`, second+" .cp-rewind"), 5*time.Second)
	m.send(t, events.TypeAgentState, events.AgentState{State: troupe.StateBusy})
	p.wait("no rewind while busy", `[...document.querySelectorAll(".cp-rewind")].every(b => b.disabled)`, 10*time.Second)
	m.send(t, events.TypeAgentState, events.AgentState{State: troupe.StateIdle})
	p.wait("rewind offered again", `[...document.querySelectorAll(".cp-rewind")].every(b => !b.disabled)`, 10*time.Second)
	p.shot("checkpoints")

	// A workspace without checkpoints says why, once.
	eval[string](p, `location.hash = "#/p/`+cpProject+`/agent/b"`)
	p.wait("b's reason", `document.querySelector('#agent[data-agent="b"] #no-checkpoints')`, 10*time.Second)
	if s := eval[string](p, `[...document.querySelectorAll('#no-checkpoints')].map(e => e.innerText).join("|")`); s != "Not a git repository: no checkpoints (run git init in the project's folder to have them)" {
		t.Errorf("b's checkpoints say %q", s)
	}
	p.shot("checkpoints-none")

	// Many: the newest 50, then the rest on demand.
	eval[string](p, `location.hash = "#/p/`+cpProject+`/agent/c"`)
	const shown = `document.querySelectorAll('#agent[data-agent="c"] #checkpoints .checkpoint')`
	p.wait("c's newest 50", shown+`.length === 50`, 10*time.Second)
	if s := eval[string](p, shown+`[0].dataset.checkpoint + "," + `+shown+`[49].dataset.checkpoint`); s != "60,11" {
		t.Errorf("c's first and 50th listed: %s, want 60,11", s)
	}
	if s := eval[string](p, `document.querySelector("#checkpoints-more").innerText`); s != "show more (10 older)" {
		t.Errorf("the more button says %q", s)
	}
	p.click("show more", "#checkpoints-more")
	p.wait("all 60", shown+`.length === 60 && !document.querySelector("#checkpoints-more")`, 10*time.Second)
}
