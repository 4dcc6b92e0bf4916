package troupe

import (
	"regexp"
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
