package checktest_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/check/checktest"
)

// TestMemStore holds the reference implementation to its own contract.
func TestMemStore(t *testing.T) {
	checktest.RunStore(t, func(*testing.T) check.Store { return check.NewMemStore() })
}
