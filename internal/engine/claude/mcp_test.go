package claude

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/enginetest"
)

// fakeMCP is enginetest's fake MCP endpoint, by the names these tests use.
type fakeMCP struct{ *enginetest.FakeMCP }

func newFakeMCP(t *testing.T) fakeMCP {
	m := enginetest.NewFakeMCP(t)
	return fakeMCP{m}
}
