package attempt

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/troupe"
	"github.com/troupe-dev/troupe/internal/worktree"
)

// ID names an attempt; the Store sets it, rising.
type ID int64

// Bounds of attempts.
const (
	// MaxAgents is how many agents one attempt may give its task to.
	MaxAgents = 8
	// MaxRunningPerProject is how many attempts may run at once in one
	// project.
	MaxRunningPerProject = 3
	// KeepPerProject is how many attempts of a project the Store keeps,
	// the oldest removed first.
	KeepPerProject = 50
	// MaxTaskBytes bounds a task's text, as any request's
	// (runtime.MaxMessageBytes).
	MaxTaskBytes = 1 << 20
	// MaxOutput is the tail of a member's check output an attempt keeps
	// (the whole result's tail is the check's: troupe checks).
	MaxOutput = 4 << 10
)

// State is an attempt's state.
type State string

// The states of an attempt.
const (
	Running State = "running" // some member is not done
	Done    State = "done"    // every member is done, and ranked
)

// MemberState is where one member is.
type MemberState string

// The states of a member: working → checking → done.
const (
	Working  MemberState = "working"  // its request is pending
	Checking MemberState = "checking" // its request ended; the check runs
	Finished MemberState = "done"     // checked (or could not be), counted
)

// Member is one agent of an attempt and how its work went.
type Member struct {
	Agent  troupe.AgentID `json:"agent"`
	Engine troupe.Engine  `json:"engine"`
	Model  string         `json:"model,omitempty"`
	State  MemberState    `json:"state"`
	// Request is the delegation of the task to the agent; RequestState
	// its end (pending while it works).
	Request      troupe.RequestID    `json:"request,omitempty"`
	RequestState troupe.RequestState `json:"request_state,omitempty"`
	// Error says what went wrong besides the check's verdict: the
	// request's error, a check that could not run, a change not counted.
	Error string `json:"error,omitempty"`
	// Check is the id of the check's result (troupe checks), Verdict its
	// state, ExitCode its command's exit (-1: none), Output its tail (at
	// most MaxOutput bytes).
	Check    int64             `json:"check,omitempty"`
	Verdict  troupe.CheckState `json:"verdict,omitempty"`
	ExitCode int               `json:"exit_code"`
	Output   string            `json:"output,omitempty"`
	// Change is the size of its work against the attempt's base.
	Change worktree.Stat `json:"change"`
	// DelegatedAt is when the task was given; EndedAt when its check
	// ended; DurationMS the time between.
	DelegatedAt time.Time `json:"delegated_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	DurationMS  int64     `json:"duration_ms,omitempty"`
	// CostUSD is the cost of its turns in that time, nil when its engine
	// reports none.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Rank (1 is best) and Reason are set when the attempt is done.
	Rank   int    `json:"rank,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Key is the member's RuntimeKey in project p.
func (m Member) Key(p troupe.ProjectID) troupe.RuntimeKey {
	return troupe.RuntimeKey{Project: p, Agent: m.Agent}
}

// Passed reports whether its check passed.
func (m Member) Passed() bool { return m.Verdict == troupe.CheckPassed }

// Attempt is one task given to several agents from the same base.
type Attempt struct {
	ID      ID               `json:"id"`
	Project troupe.ProjectID `json:"project"`
	Task    string           `json:"task"`
	Check   troupe.CheckName `json:"check"`
	// Base is the commit every member's worktree started from: the
	// project's HEAD when the attempt started.
	Base      string    `json:"base"`
	State     State     `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Winner is the member ranked first when its check passed and it
	// changed something; "" otherwise.
	Winner troupe.AgentID `json:"winner,omitempty"`
	// Discarded: the losers' worktrees were reset (Discard).
	Discarded bool     `json:"discarded,omitempty"`
	Members   []Member `json:"members"`
}

// Head is the task's first line, at most n bytes: for lists.
func (a Attempt) Head(n int) string {
	line, _, _ := strings.Cut(strings.TrimSpace(a.Task), "\n")
	if len(line) > n {
		cut := n
		for cut > 0 && !utf8Start(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	return line
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Losers are the members Discard resets: all but the winner.
func (a Attempt) Losers() []troupe.AgentID {
	var out []troupe.AgentID
	for _, m := range a.Members {
		if m.Agent != a.Winner {
			out = append(out, m.Agent)
		}
	}
	return out
}

// Rank orders ms (see the package doc), sets each one's Rank and Reason,
// and returns them in rank order with the winner ("" when the first did
// not pass or changed nothing). check names the check in reasons.
func Rank(ms []Member, check troupe.CheckName) ([]Member, troupe.AgentID) {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, compare)
	for i := range out {
		out[i].Rank = i + 1
		if i == 0 {
			out[i].Reason = firstReason(out[0], check)
		} else {
			out[i].Reason = reason(out[i-1], out[i], check)
		}
	}
	var winner troupe.AgentID
	if len(out) > 0 && out[0].Passed() && out[0].Change.Files > 0 {
		winner = out[0].Agent
	}
	return out, winner
}

// compare is Rank's order: negative when a ranks before b.
func compare(a, b Member) int {
	if c := boolFirst(a.Passed(), b.Passed()); c != 0 {
		return c
	}
	if c := boolFirst(a.Change.Files > 0, b.Change.Files > 0); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Change.Lines(), b.Change.Lines()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.DurationMS, b.DurationMS); c != 0 {
		return c
	}
	if c := compareCost(a.CostUSD, b.CostUSD); c != 0 {
		return c
	}
	return cmp.Compare(a.Agent, b.Agent)
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// compareCost orders the lower cost first, an unknown one last.
func compareCost(a, b *float64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return cmp.Compare(*a, *b)
}

// verdictText says how m's check went, like "failed test (exit 1)".
func verdictText(m Member, check troupe.CheckName) string {
	switch {
	case m.Verdict == "":
		return "its check " + string(check) + " did not run"
	case m.Verdict == troupe.CheckPassed:
		return "passed " + string(check)
	case m.ExitCode >= 0:
		return fmt.Sprintf("%s %s (exit %d)", m.Verdict, check, m.ExitCode)
	}
	return fmt.Sprintf("%s %s", m.Verdict, check)
}

func changeText(s worktree.Stat) string {
	if s.Files == 0 {
		return "changed nothing"
	}
	files := "files"
	if s.Files == 1 {
		files = "file"
	}
	return fmt.Sprintf("+%d -%d in %d %s", s.Added, s.Deleted, s.Files, files)
}

func firstReason(m Member, check troupe.CheckName) string {
	switch {
	case m.Passed() && m.Change.Files > 0:
		return "best: " + verdictText(m, check) + " with " + changeText(m.Change)
	case m.Passed():
		return "passed " + string(check) + " but changed nothing: nothing to merge"
	}
	return "no member passed " + string(check) + "; first of those that did not: " + verdictText(m, check) + ", " + changeText(m.Change)
}

// reason says why m ranks after prev, the member just before it.
func reason(prev, m Member, check troupe.CheckName) string {
	after := "after " + string(prev.Agent) + ": "
	switch {
	case prev.Passed() && !m.Passed():
		return after + verdictText(m, check)
	case prev.Change.Files > 0 && m.Change.Files == 0:
		return after + "changed nothing (an empty change ranks after any change with the same verdict)"
	case prev.Change.Lines() != m.Change.Lines():
		return after + fmt.Sprintf("a larger change (%d lines against %d)", m.Change.Lines(), prev.Change.Lines())
	case prev.DurationMS != m.DurationMS:
		return after + fmt.Sprintf("slower (%s against %s)", ms(m.DurationMS), ms(prev.DurationMS))
	case compareCost(prev.CostUSD, m.CostUSD) != 0:
		if m.CostUSD == nil {
			return after + "its cost is unknown"
		}
		return after + fmt.Sprintf("costlier ($%.4f against $%.4f)", *m.CostUSD, *prev.CostUSD)
	}
	return after + "a tie on verdict, change, time and cost: by name"
}

func ms(n int64) string {
	return (time.Duration(n) * time.Millisecond).Round(time.Millisecond).String()
}
