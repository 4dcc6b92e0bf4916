package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFakemodelRefusesAnAddressBeyondLoopback: `troupe fakemodel` on
// 0.0.0.0 (or an address with no host) fails before serving, naming
// --allow-remote.
func TestFakemodelRefusesAnAddressBeyondLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"fakemodel", "--addr", addr}, &out, &errb, false, false)
		if code == 0 || !strings.Contains(errb.String(), "--allow-remote") || strings.Contains(out.String(), "fake model at") {
			t.Errorf("fakemodel --addr %s: exit %d, stdout %q, stderr %q; want a refusal naming --allow-remote", addr, code, out.String(), errb.String())
		}
	}
}
