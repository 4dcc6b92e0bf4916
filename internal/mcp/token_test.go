package mcp

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// TestC2_TokensAreThirtyTwoRandomBytes: every MCP token is "trp_" and 32
// random bytes in hex, a new one at every Mint.
func TestC2_TokensAreThirtyTwoRandomBytes(t *testing.T) {
	ts := NewTokens()
	k := troupe.RuntimeKey{Project: "p", Agent: "a"}
	seen := map[string]bool{}
	for range 100 {
		tok := ts.Mint(k, 0)
		raw, ok := strings.CutPrefix(tok, "trp_")
		b, err := hex.DecodeString(raw)
		if !ok || err != nil || len(b) < 32 {
			t.Fatalf("token %q: want trp_ and at least 32 bytes in hex", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q minted twice", tok)
		}
		seen[tok] = true
	}
}
