package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type approverFunc func(context.Context, Permission) (Decision, error)

func (f approverFunc) Approve(ctx context.Context, p Permission) (Decision, error) { return f(ctx, p) }

// TestAskDeniesWithoutADecision: no Approver, or an Approver that gives no
// decision, is a denial saying why; a decision passes through.
func TestAskDeniesWithoutADecision(t *testing.T) {
	ctx := context.Background()
	if d := Ask(ctx, nil, Permission{Tool: "Bash"}); d.Allow || d.Reason != ErrNoApprover.Error() {
		t.Errorf("no approver: %+v", d)
	}
	failing := approverFunc(func(context.Context, Permission) (Decision, error) {
		return Decision{Allow: true}, errors.New("turn ended")
	})
	if d := Ask(ctx, failing, Permission{}); d.Allow || !strings.Contains(d.Reason, "not approved: turn ended") {
		t.Errorf("no decision: %+v", d)
	}
	allow := approverFunc(func(_ context.Context, p Permission) (Decision, error) { return Decision{Allow: p.Tool == "Read"}, nil })
	if !Ask(ctx, allow, Permission{Tool: "Read"}).Allow || Ask(ctx, allow, Permission{Tool: "Bash"}).Allow {
		t.Error("the approver's decision did not pass through")
	}
}
