package daemon

import (
	"context"
	"strings"
	"testing"
)

// TestRemoteAddrNeedsAllowRemote: an address beyond loopback is refused
// unless --allow-remote says so, and an unspecified one then also needs
// the public name that Host and Origin are checked against.
func TestRemoteAddrNeedsAllowRemote(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		addr   string
		allow  bool
		public string
		want   string // a part of the error; "" for none
	}{
		{"127.0.0.1:7433", false, "", ""},
		{"[::1]:7433", false, "", ""},
		{"localhost:7433", false, "", ""},
		{"0.0.0.0:7433", false, "", "listening on 0.0.0.0 exposes your agents beyond this machine: pass --allow-remote and --public-name HOST if you mean it"},
		{"[::]:7433", false, "", "listening on :: exposes your agents"},
		{":7433", false, "", "listening on every interface exposes your agents"},
		{"192.0.2.7:7433", false, "", "pass --allow-remote"},
		{"0.0.0.0:7433", true, "", "needs --public-name HOST"},
		{"0.0.0.0:7433", true, "box.example", ""},
		{"192.0.2.7:7433", true, "", ""},
		{"127.0.0.1:7433", false, "box.example", "needs --allow-remote"},
		{"0.0.0.0:7433", true, "http://box.example:80", "bare host name"},
		{"7433", false, "", "give HOST:PORT"},
	} {
		err := CheckAddr(ctx, c.addr, c.allow, c.public)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s allow=%v public=%q: %v, want no error", c.addr, c.allow, c.public, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s allow=%v public=%q: %v, want an error with %q", c.addr, c.allow, c.public, err, c.want)
		}
	}
	// Run refuses before it takes the state dir.
	dir := t.TempDir()
	err := Run(ctx, Config{Addr: "0.0.0.0:0", StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
		t.Fatalf("Run on 0.0.0.0 without --allow-remote: %v", err)
	}
}
