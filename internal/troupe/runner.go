package troupe

import "regexp"

// RunnerName names a runner: a machine that runs some of the daemon's
// agents (`troupe runner --name NAME`). An agent's team names the runner
// it runs on (runner = "NAME"), or the labels the runner must have
// (runner_labels); without either it runs on the daemon's machine.
type RunnerName string

var runnerNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// RunnerNameRule says what a runner name, or a runner label, may be.
const RunnerNameRule = "use 1 to 32 lower-case letters, digits or '-', starting with a letter or digit"

// Valid reports whether n follows RunnerNameRule.
func (n RunnerName) Valid() bool { return runnerNamePattern.MatchString(string(n)) }

// ValidRunnerLabel reports whether l may be a runner's label: the same
// rule as a runner's name.
func ValidRunnerLabel(l string) bool { return runnerNamePattern.MatchString(l) }

// MaxRunnerLabels bounds the labels an agent may require (and a runner
// may have).
const MaxRunnerLabels = 16
