package enginetest

import (
	"os"
	"testing"
)

// PinnedCLI returns the path of a pinned agent CLI named by the
// environment variable env (`make test` sets it). When it is unset or
// missing, the test fails if CI=true (the CI must run the real-CLI tests)
// and is skipped otherwise; install says how to get it.
func PinnedCLI(t testing.TB, env, install string) string {
	t.Helper()
	bin := os.Getenv(env)
	why := env + " is not set"
	if bin != "" {
		_, err := os.Stat(bin)
		if err == nil {
			return bin
		}
		why = env + "=" + bin + ": " + err.Error()
	}
	msg := why + ": run `make tools` and `make test` (which sets " + env + "), or set it to " + install
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
