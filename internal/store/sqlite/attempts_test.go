package sqlite

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/attempt"
	"github.com/troupe-dev/troupe/internal/attempt/attempttest"
)

func TestAttemptStoreContract(t *testing.T) {
	attempttest.RunStore(t, func(t *testing.T) attempt.Store { return openTest(t, newPath(t)).Attempts() })
}
