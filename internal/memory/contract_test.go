package memory_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/memory/memorytest"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func TestMemIndexContract(t *testing.T) {
	memorytest.RunIndex(t, func(*testing.T, ...troupe.ProjectID) memory.Index { return memory.NewMemIndex() })
}
