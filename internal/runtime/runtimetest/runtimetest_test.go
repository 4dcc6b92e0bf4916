package runtimetest_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/runtime"
	"github.com/troupe-dev/troupe/internal/runtime/runtimetest"
)

// TestMemStore holds the reference implementation to its own contract.
func TestMemStore(t *testing.T) {
	runtimetest.RunStore(t, func(*testing.T) runtime.Store { return runtime.NewMemStore() })
}
