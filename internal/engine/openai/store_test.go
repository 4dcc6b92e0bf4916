package openai_test

import (
	"testing"

	"github.com/troupe-dev/troupe/internal/engine/openai"
	"github.com/troupe-dev/troupe/internal/engine/openai/chatstoretest"
)

func TestMemStoreContract(t *testing.T) {
	chatstoretest.Run(t, func(*testing.T) openai.Store { return openai.NewMemStore() })
}
