package sqlite

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/check"
	"github.com/troupe-dev/troupe/internal/check/checktest"
)

func TestCheckStoreContract(t *testing.T) {
	checktest.RunStore(t, func(t *testing.T) check.Store { return openTest(t, newPath(t)).Checks() })
}
