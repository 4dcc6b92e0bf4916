package daemon

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/statedir"
)

func TestRepairRefusesWhileADaemonHoldsTheLock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lock(statedir.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := Repair(t.Context(), dir, nil); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("Repair under a running daemon: %v, want a refusal", err)
	}
}
