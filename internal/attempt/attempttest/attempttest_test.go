package attempttest_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/attempt/attempttest"
)

// TestMemStore holds the reference implementation to its own contract.
func TestMemStore(t *testing.T) {
	attempttest.RunStore(t, func(*testing.T) attempt.Store { return &attempt.MemStore{} })
}
