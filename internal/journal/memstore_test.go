package journal_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/journal/journaltest"
)

func TestMemStoreContract(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journal.Store { return journal.NewMemStore() })
}
