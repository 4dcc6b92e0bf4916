package tasktest_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/task/tasktest"
)

// TestMemStore holds the reference implementation to its own contract.
func TestMemStore(t *testing.T) {
	tasktest.RunStore(t, func(*testing.T) (task.Store, task.Inbox) {
		return task.NewMemStore(), inbox.NewMemStore()
	})
}
