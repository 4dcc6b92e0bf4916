package inboxtest_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/inbox/inboxtest"
)

// TestMemStore holds the reference implementation to its own contract.
func TestMemStore(t *testing.T) {
	inboxtest.RunStore(t, func(*testing.T) inbox.Store { return inbox.NewMemStore() })
}
