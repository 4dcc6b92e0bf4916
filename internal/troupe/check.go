package troupe

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// CheckName names one of a project's checks: a command the project
// declares in its team file ([checks]) that troupe runs in an agent's
// workspace to verify its work (internal/check).
type CheckName string

var checkNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// CheckNameRule says what a check's name may be.
const CheckNameRule = "use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit"

// Valid reports whether n follows CheckNameRule.
func (n CheckName) Valid() bool { return checkNamePattern.MatchString(string(n)) }

// Bounds of a check's definition.
const (
	DefaultCheckTimeout = 10 * time.Minute // a check without timeout
	MaxCheckTimeout     = 24 * time.Hour
	MaxChecks           = 32 // checks one team file may declare
)

// Check is one check of a project, as the approved team defines it: a
// shell command, how long it may run, and the folder it runs in, relative
// to the agent's workspace ("" or "." for the workspace itself; clean,
// never absolute, never "..").
type Check struct {
	Name    CheckName     `json:"name"`
	Command string        `json:"command"`
	Timeout time.Duration `json:"timeout"`
	Dir     string        `json:"dir,omitempty"`
	Line    int           `json:"-"` // the line of its key in the team file; 0 when unknown
}

// CheckState is a check run's verdict.
type CheckState string

// The verdicts of a check run.
const (
	CheckPassed   CheckState = "passed"    // the command exited 0
	CheckFailed   CheckState = "failed"    // it exited non-zero, or a signal ended it
	CheckTimedOut CheckState = "timed_out" // its timeout ended it
	CheckError    CheckState = "error"     // it could not run (no workspace, bad dir, runner, …)
)

// CheckSender is the sender of troupe's message to a worker whose work on
// a verified delegation failed its check (a message of kind delegate on
// the same request): troupe wrote it, not the delegator.
const CheckSender AgentID = "@check"

// Bounds of a verified delegation (Request.Verify).
const (
	DefaultVerifyTries = 2 // the worker's turns a check judges when the delegation does not say
	MaxVerifyTries     = 5
	// MaxVerdictOutput is the tail of a check's output a Verdict keeps:
	// what the worker is sent back and the delegator receives.
	MaxVerdictOutput = 4 << 10
)

// Verdict is troupe's own check of a worker's answer to a verified
// delegation: the run of the delegation's check on the worker's
// workspace when its turn ended (internal/check), as troupe measured it.
type Verdict struct {
	Check      CheckName  `json:"check"`
	State      CheckState `json:"state"`
	ExitCode   int        `json:"exit_code"`            // -1 when the command did not exit by itself
	DurationMS int64      `json:"duration_ms"`          // the run's own time
	Result     int64      `json:"result,omitempty"`     // the check result's id (troupe checks)
	Turn       TurnID     `json:"turn,omitempty"`       // the worker's turn it checked
	Try        int        `json:"try"`                  // which of the delegation's tries it judged, from 1
	Reason     string     `json:"reason,omitempty"`     // why it failed without an exit code, timed out or could not run
	Output     string     `json:"output,omitempty"`     // the tail of its output, at most MaxVerdictOutput bytes
	OutputCut  bool       `json:"output_cut,omitempty"` // Output is only the tail
}

// Passed reports whether the check passed.
func (v Verdict) Passed() bool { return v.State == CheckPassed }

// Header is the verdict in one line, as the delegator and the worker
// read it: [check test: passed, exit 0, 1.2 s, try 1 of 2, by troupe].
func (v Verdict) Header(tries int) string {
	exit := fmt.Sprintf("exit %d", v.ExitCode)
	if v.ExitCode < 0 {
		exit = "no exit code"
	}
	try := ""
	if tries > 0 {
		try = fmt.Sprintf(", try %d of %d", v.Try, tries)
	}
	return fmt.Sprintf("[check %s: %s, %s, %.1f s%s, by troupe]", v.Check, strings.ReplaceAll(string(v.State), "_", " "),
		exit, float64(v.DurationMS)/1000, try)
}

// Details is what a failed verdict says beyond its header: why, and the
// tail of the check's output.
func (v Verdict) Details() string {
	var b strings.Builder
	if v.Reason != "" {
		fmt.Fprintf(&b, "why: %s\n", v.Reason)
	}
	switch {
	case v.Output == "":
		b.WriteString("the check printed nothing\n")
	case v.OutputCut:
		fmt.Fprintf(&b, "the last %d bytes of the check's output:\n%s", len(v.Output), v.Output)
	default:
		fmt.Fprintf(&b, "the check's output:\n%s", v.Output)
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	return b.String()
}
