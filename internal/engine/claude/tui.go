package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/troupe-dev/troupe/internal/claudefmt"
	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/engine"
	"github.com/troupe-dev/troupe/internal/engine/terminal"
	"github.com/troupe-dev/troupe/internal/procstat"
	"github.com/troupe-dev/troupe/internal/term"
)

// Terminal mode (mode = "terminal"): Claude Code's own TUI on a PTY. Facts
// in docs/engines/claude-code.md ("Transcripts", "Terminal UI", "Session
// registry").

// envNoFlicker chooses Claude Code's renderer: 0 the classic one, 1 the
// fullscreen one.
const envNoFlicker = "CLAUDE_CODE_NO_FLICKER"

// tuiPoll is how often the TUI driver reads the session's registry file
// and transcript between outputs.
const tuiPoll = 250 * time.Millisecond

// tuiFallbackIdle is how long the registry must say idle, after a turn
// was seen busy, for the turn to count as ended when the transcript has no
// end-of-turn line.
const tuiFallbackIdle = 3 * time.Second

// Caps on what the driver reads (C14: the transcript is written by the
// agent's own program).
const (
	maxTranscriptRun  = 8 << 20 // read per poll
	maxTranscriptLine = 4 << 20 // one transcript line
	maxAnswer         = 256 << 10
)

// tuiArgv is the TUI's command line: no -p, no stream-json, no permission
// prompt tool (its permission prompts show on its screen); --allowedTools,
// variadic, comes last.
func (l *launch) tuiArgv(id string, resume bool) []string {
	return l.sessionArgs(append([]string{l.command}, l.agent.Args...), id, resume)
}

// startTUI starts the agent's TUI on a terminal.
func (e *Engine) startTUI(spec engine.StartSpec, l *launch, tmp string, log *slog.Logger) (engine.Session, error) {
	cfg := configDir(l.env)
	if cfg == "" {
		return nil, errors.New("find Claude Code's config folder: neither HOME nor CLAUDE_CONFIG_DIR is set")
	}
	cwd, err := filepath.EvalSymlinks(l.dir)
	if err != nil {
		return nil, fmt.Errorf("resolve working directory: %w", err)
	}
	id, resume := spec.Resume, spec.Resume != ""
	tpath := func(id string) string { return filepath.Join(cfg, "projects", claudefmt.MungePath(cwd), id+".jsonl") }
	if resume {
		if _, err := os.Stat(tpath(id)); err != nil {
			log.Info("the conversation to resume has no transcript: starting a new one", "session", id)
			resume = false
		}
	}
	if !resume {
		id = newSessionID()
	}
	if l.sandbox != nil {
		if err := saveApprovals(l.env, cwd); err != nil {
			log.Warn("Claude Code's trust and API-key approvals not saved: its dialogs will be answered on screen, and not kept", "err", err)
		}
	}
	env := make([]string, 0, len(l.env)+2)
	for _, kv := range l.env {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, envNoFlicker+"=") {
			env = append(env, kv)
		}
	}
	// TERM: what the emulator is. The classic renderer, the one the
	// driver reads: in a bubblewrap sandbox the TUI otherwise opens with
	// an offer of its fullscreen renderer (docs/engines/claude-code.md,
	// "Dialogs").
	env = append(env, "TERM=xterm-256color", envNoFlicker+"=0")
	reg := l.registry
	if reg == "" {
		reg = filepath.Join(cfg, "sessions")
	}
	d := &tuiDriver{registry: reg, sessionID: id, transcript: tpath(id), log: log}
	s, err := terminal.Launch(term.Options{
		Argv:        l.tuiArgv(id, resume),
		Dir:         l.dir,
		Env:         env,
		Logger:      log,
		StopTimeout: e.stopTimeout,
		Sandbox:     l.sandbox,
	}, terminal.SessionSpec{
		Name:   string(spec.Key.Agent),
		Driver: d,
		Logger: log,
		Cleanup: func() {
			if tmp != "" {
				os.RemoveAll(tmp)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.Emit(engine.Event{Kind: engine.EventSession, SessionID: id})
	return s, nil
}

// configDir is Claude Code's folder in the child's environment:
// CLAUDE_CONFIG_DIR, else $HOME/.claude ("" when it names neither).
func configDir(env []string) string {
	get := func(k string) string { v, _ := lookup(env, k); return v }
	if get("CLAUDE_CONFIG_DIR") == "" && get("HOME") == "" {
		return ""
	}
	d, _ := claudefmt.ConfigDir(get)
	return d
}

// tuiDriver reads Claude Code's TUI: dialogs from its screen, busy and
// idle from its registry file's status, the end of a turn and its answer
// from its transcript (docs/engines/claude-code.md, "Session registry",
// "Transcripts").
type tuiDriver struct {
	registry   string // the folder of the CLI's registry files
	root       int    // the terminal's session: the program's pid (SetPID)
	sessionID  string
	transcript string
	log        *slog.Logger
	bump       atomic.Pointer[func()]

	regFile  string // the registry file found for the session
	status   string // its status: idle, busy, waiting; "" before it exists
	waitFor  string
	regPID   int
	regStart string

	// The transcript, read from off on.
	off     int64
	partial []byte
	// The submitted turn.
	turnOn    bool
	sawBusy   bool
	idleSince time.Time
	ended     bool
	answer    []string       // text blocks since the last tool result
	out       []string       // text blocks not yet taken (TakeOutput)
	events    []engine.Event // tool calls and results not yet taken (TakeEvents), at most maxTUIEvents
	limit     *engine.Limit  // the turn ended on a usage or rate limit
	failure   string
}

// maxTUIEvents bounds the tool events kept between two takes (the session
// takes them at every look); past it they are dropped and logged: a call
// whose end is lost counts as activity until its limit only.
const maxTUIEvents = 256

var _ terminal.Driver = (*tuiDriver)(nil)

// SetBump implements the session's activity hook: transcript growth is
// activity (C3).
func (d *tuiDriver) SetBump(b func()) { d.bump.Store(&b) }

func (d *tuiDriver) bumpNow() {
	if f := d.bump.Load(); f != nil {
		(*f)()
	}
}

func (d *tuiDriver) Poll() time.Duration { return tuiPoll }

// SetPID is told the program's pid, which leads its terminal's session
// (terminal.Launch), before the session's loop starts.
func (d *tuiDriver) SetPID(pid int) { d.root = pid }

// TakeEvents: the turn's tool calls and results the transcript got since
// the last call (terminal.EventDriver): a call in flight is activity (C3).
func (d *tuiDriver) TakeEvents() []engine.Event {
	d.readTranscript()
	evs := d.events
	d.events = nil
	return evs
}

// TurnLimit: the usage or rate limit the ended turn hit, nil when none
// (terminal.EventDriver). The TUI's transcript gives no reset time.
func (d *tuiDriver) TurnLimit() *engine.Limit { return d.limit }

// event keeps one tool event for TakeEvents, within maxTUIEvents.
func (d *tuiDriver) event(ev engine.Event) {
	if len(d.events) >= maxTUIEvents {
		d.log.Warn("tool event of the TUI's transcript dropped: too many since the last look", "kept", len(d.events))
		return
	}
	d.events = append(d.events, ev)
}

// TakeOutput: the text blocks the transcript got since the last call.
func (d *tuiDriver) TakeOutput() []string {
	d.readTranscript()
	out := d.out
	d.out = nil
	return out
}
func (d *tuiDriver) InterruptKeys() []byte { return []byte{0x1b} }

// Quit types /exit then Enter (docs/engines/claude-code.md, "Quitting");
// the escalation follows if it does not exit.
func (d *tuiDriver) Quit(ctx context.Context, w terminal.Writer) {
	_ = w.Write(ctx, []byte{0x15}) // Ctrl-U: an empty input line first
	_ = w.Write(ctx, []byte("/exit"))
	_ = w.Write(ctx, []byte("\r"))
}

// Known dialogs (docs/engines/claude-code.md, "Dialogs"): the option troupe
// selects, whatever the default.
var tuiDialogs = []struct {
	marks  []string // all shown
	choose string
}{
	{[]string{"Yes, I trust this folder"}, "Yes, I trust this folder"},
	{[]string{"Detected a custom API key", "Do you want to use this API key?"}, "Yes"},
	// An offer of a renderer the driver does not read; seen at start in
	// troupe's sandbox.
	{[]string{"Try the new fullscreen renderer?", "Not now"}, "Not now"},
}

// dialogMarks are what any of Claude Code's dialogs shows.
var dialogMarks = []string{"Enter to confirm", "Esc to cancel", "Enter to continue", "Do you want to proceed?"}

func (d *tuiDriver) Observe(s term.Screen) terminal.Observation {
	text := s.Text()
	for _, dl := range tuiDialogs {
		all := true
		for _, m := range dl.marks {
			all = all && term.Contains(text, m)
		}
		if all {
			return terminal.Observation{State: terminal.Dialog, Choose: dl.choose}
		}
	}
	d.readRegistry()
	switch d.status {
	case "waiting":
		why := d.waitFor
		if why == "" {
			why = "something"
		}
		return terminal.Observation{State: terminal.Blocked, Why: "Claude Code waits for the person (" + why + ")"}
	case "busy":
		return terminal.Observation{State: terminal.Busy}
	case "idle":
		if shown(text, dialogMarks) {
			return terminal.Observation{State: terminal.Blocked, Why: "Claude Code shows a dialog troupe does not know"}
		}
		return terminal.Observation{State: terminal.Idle}
	case "":
		if d.regFile != "" {
			// A registry file without status (2.1.197 writes none): the
			// screen says it, the footer's "esc to interrupt" while busy.
			return screenState(text)
		}
	}
	// No registry file yet: the REPL has not started.
	if shown(text, dialogMarks) {
		return terminal.Observation{State: terminal.Blocked, Why: "Claude Code shows a dialog troupe does not know"}
	}
	return terminal.Observation{State: terminal.Starting}
}

// screenState reads busy, idle or a dialog from the TUI's screen alone:
// busy while its footer offers "esc to interrupt", a dialog when one of
// dialogMarks shows, idle at its prompt (a row starting with ❯ under a
// rule).
func screenState(text string) terminal.Observation {
	switch {
	case term.Contains(text, "esc to interrupt"):
		return terminal.Observation{State: terminal.Busy}
	case shown(text, dialogMarks):
		return terminal.Observation{State: terminal.Blocked, Why: "Claude Code shows a dialog troupe does not know"}
	}
	lines := strings.Split(text, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "❯") && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "────") {
			return terminal.Observation{State: terminal.Idle}
		}
	}
	return terminal.Observation{State: terminal.Starting}
}

func shown(text string, marks []string) bool {
	for _, m := range marks {
		if term.Contains(text, m) {
			return true
		}
	}
	return false
}

// readRegistry finds the session's registry file (by its sessionId, with
// the process alive: pid and procStart agree, C8) and reads its status.
func (d *tuiDriver) readRegistry() {
	if d.regFile != "" {
		if e, ok := readEntry(d.regFile); ok && e.SessionID == d.sessionID && e.PID == d.regPID {
			d.status, d.waitFor = e.Status, e.WaitingFor
			return
		}
		d.regFile, d.status, d.waitFor = "", "", ""
	}
	dir := d.registry
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || !de.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, name)
		e, ok := readEntry(path)
		if !ok || e.SessionID != d.sessionID || !d.alive(e) {
			continue
		}
		d.regFile, d.regPID, d.regStart = path, e.PID, e.ProcStart
		d.status, d.waitFor = e.Status, e.WaitingFor
		return
	}
}

func readEntry(path string) (claudefmt.RegistryFile, bool) {
	e, err := claudefmt.ReadRegistryFile(path)
	return e, err == nil
}

// alive reports whether the process of registry entry e runs: e.PID as
// this process numbers pids (Alive), or as the pid namespace of the
// program's sandbox does (bubblewrap: the CLI is pid 1 there), where it
// is a process of the terminal's session whose innermost pid is e.PID.
func (d *tuiDriver) alive(e claudefmt.RegistryFile) bool {
	return Alive(e.PID, e.ProcStart) || (d.root > 0 && inSession(d.root, e.PID, e.ProcStart))
}

// inSession reports whether a process of session sid, started at
// procStart (field 22 of its /proc stat), has nspid as its pid in its
// own pid namespace (the last of the NSpid line of /proc/<pid>/status).
// It reads /proc whole: the driver asks until it finds the registry
// file, then no more.
func inSession(sid, nspid int, procStart string) bool {
	if sid <= 0 || nspid <= 0 || procStart == "" {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := strconv.Itoa(sid)
	for _, de := range ents {
		name := de.Name()
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil || st.Zombie() || strconv.Itoa(st.Session) != want || st.StartString() != procStart {
			continue
		}
		status, err := os.ReadFile("/proc/" + name + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				ids := strings.Fields(rest)
				if len(ids) > 0 && ids[len(ids)-1] == strconv.Itoa(nspid) {
					return true
				}
			}
		}
	}
	return false
}

// Alive reports whether process pid runs and started at procStart (field
// 22 of /proc/<pid>/stat, as Claude Code's registry records it): a pid
// alone may have been reused.
func Alive(pid int, procStart string) bool {
	if pid <= 0 || procStart == "" {
		return false
	}
	st, err := procstat.Read(pid)
	return err == nil && !st.Zombie() && st.StartString() == procStart
}

// Submitted notes where the turn's transcript lines start.
func (d *tuiDriver) Submitted(term.Screen) {
	d.readTranscript() // what came before belongs to earlier turns
	d.turnOn, d.sawBusy, d.ended = true, false, false
	d.answer, d.out, d.failure, d.events, d.limit = nil, nil, "", nil, nil
	d.idleSince = time.Time{}
}

// TurnEnded: the transcript's end-of-turn line (system turn_duration, or
// an api_error) after the turn's input; or, interrupted or without one,
// the registry idle again after the turn was seen busy.
func (d *tuiDriver) TurnEnded(s term.Screen, interrupting bool) (bool, string, string) {
	d.readTranscript()
	d.readRegistry()
	switch d.status {
	case "busy", "waiting":
		d.sawBusy = true
		d.idleSince = time.Time{}
	case "idle":
		if d.idleSince.IsZero() {
			d.idleSince = time.Now()
		}
	}
	done := d.ended
	if !done && d.status == "idle" && d.sawBusy {
		done = interrupting || time.Since(d.idleSince) >= tuiFallbackIdle
	}
	if !done {
		return false, "", ""
	}
	d.turnOn = false
	return true, strings.TrimSpace(strings.Join(d.answer, "\n")), d.failure
}

// readTranscript reads the lines appended since the last read (at most
// maxTranscriptRun a call; a line longer than maxTranscriptLine is skipped).
func (d *tuiDriver) readTranscript() {
	f, err := os.OpenFile(d.transcript, os.O_RDONLY|syscallNonblock, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if fi.Size() < d.off { // replaced: start over
		d.off, d.partial = 0, nil
	}
	if fi.Size() == d.off {
		return
	}
	if _, err := f.Seek(d.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReaderSize(io.LimitReader(f, maxTranscriptRun), 64<<10)
	for {
		chunk, err := r.ReadSlice('\n')
		d.off += int64(len(chunk))
		if len(d.partial)+len(chunk) <= maxTranscriptLine {
			d.partial = append(d.partial, chunk...)
		} else {
			d.partial = append(d.partial[:0], "{}"...) // too long: skipped
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			break // a partial last line waits for its end
		}
		line := d.partial
		d.partial = nil
		d.bumpNow()
		if d.turnOn {
			d.take(line)
		}
	}
}

// take reads one transcript line of the submitted turn.
func (d *tuiDriver) take(line []byte) {
	var l claudefmt.Entry
	if json.Unmarshal(line, &l) != nil {
		return
	}
	switch l.Type {
	case "assistant":
		var blocks []claudefmt.Block
		if json.Unmarshal(l.Message.Content, &blocks) != nil {
			return
		}
		if l.Error == "rate_limit" || l.APIErrorStatus == 429 {
			// The CLI's line for a refused request: its text is the
			// error, not an answer.
			d.limit = &engine.Limit{}
			d.failure = "Claude Code's request to the model was refused for a usage or rate limit"
			for _, b := range blocks {
				if b.Type == "text" && b.Text != "" {
					d.failure += ": " + clip.Head(b.Text, 500)
					break
				}
			}
			return
		}
		for _, b := range blocks {
			switch {
			case b.Type == "text" && b.Text != "" && size(d.answer)+len(b.Text) <= maxAnswer:
				d.answer = append(d.answer, b.Text)
				if len(d.out) < 256 {
					d.out = append(d.out, b.Text)
				}
			case b.Type == "tool_use" && b.ID != "":
				d.event(engine.Event{Kind: engine.EventToolCall, Tool: &engine.ToolUse{ID: b.ID, Name: b.Name, Input: b.Input, Limit: bashLimit(b.Name, b.Input)}})
			}
		}
	case "user":
		var blocks []claudefmt.Block
		if json.Unmarshal(l.Message.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_result" {
					d.answer = nil // the answer is what follows the last tool
					if b.ToolUseID != "" {
						d.event(engine.Event{Kind: engine.EventToolResult, Tool: &engine.ToolUse{ID: b.ToolUseID}})
					}
				}
			}
		}
	case "system":
		switch l.Subtype {
		case "turn_duration":
			d.ended = true
		case "api_error":
			d.failure = "Claude Code's request to the model failed"
			if s, ok := l.Content.(string); ok && s != "" {
				d.failure += ": " + s
			}
		}
	}
}

func size(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}
