package runtime

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/runtime/sessionstest"
)

var _ sessionstest.Store = Sessions(nil)

func TestMemSessionsContract(t *testing.T) {
	sessionstest.Run(t, func(*testing.T) sessionstest.Store { return NewMemSessions() })
}
