package daemon

import (
	"context"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/clip"
	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// verifier runs the checks of verified delegations for the runtime
// (runtime.Verifier) with the daemon's Checker: each run is recorded on
// the worker's turn and on the feed like any other.
type verifier struct{ checks *check.Checker }

var _ runtime.Verifier = verifier{}

// Checks implements runtime.Verifier.
func (v verifier) Checks(p troupe.ProjectID) []troupe.Check { return v.checks.Checks(p) }

// Verify implements runtime.Verifier: the Result as a Verdict, its
// output cut to its last troupe.MaxVerdictOutput bytes.
func (v verifier) Verify(ctx context.Context, k troupe.RuntimeKey, name troupe.CheckName, turn troupe.TurnID) (troupe.Verdict, error) {
	r, err := v.checks.RunOn(ctx, k, name, turn)
	if err != nil && r.State == "" {
		return troupe.Verdict{}, err
	}
	// A run that ended but could not be recorded is still the verdict.
	out := clip.Tail(r.Output, troupe.MaxVerdictOutput)
	return troupe.Verdict{Check: r.Check, State: r.State, ExitCode: r.ExitCode, DurationMS: r.DurationMS, Result: r.ID, Turn: r.Turn,
		Reason: r.Reason, Output: out, OutputCut: len(out) < len(r.Output) || r.OutputCut != ""}, nil
}
