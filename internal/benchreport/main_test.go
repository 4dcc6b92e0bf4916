package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/troupe-dev/troupe/internal/store/sqlite
BenchmarkInboxAppend-2   	    2000	    300000 ns/op	      3300 msgs/s	     512 B/op	      9 allocs/op
BenchmarkInboxAppend-2   	    2000	    300000 ns/op	      1900 msgs/s	     512 B/op	      9 allocs/op
BenchmarkInboxAppend-2   	    2000	    300000 ns/op	      3100 msgs/s	     512 B/op	      9 allocs/op
BenchmarkOpen-2          	     200	    800000 ns/op
pkg: github.com/troupe-dev/troupe/internal/api
BenchmarkFanout/subs=10-2         	      40	   1000 ns/op	         1.2 cpu-us/ev/sub
BenchmarkFanout/subs=10-2         	      40	   1000 ns/op	         1.4 cpu-us/ev/sub
BenchmarkFanout/subs=200-2        	      40	   1000 ns/op	         1.5 cpu-us/ev/sub
BenchmarkFanout/subs=200-2        	      40	   1000 ns/op	         1.7 cpu-us/ev/sub
pkg: github.com/troupe-dev/troupe/cmd/troupe
BenchmarkSandboxIdleMemory/agents=10/sandbox=true-2         	       1	1568892102 ns/op	        40 children-pss-MB
BenchmarkSandboxIdleMemory/agents=10/sandbox=false-2        	       1	1870670285 ns/op	        35 children-pss-MB
BenchmarkSandboxIdleMemory/agents=100/sandbox=true-2        	       1	1917064630 ns/op	       240 children-pss-MB
BenchmarkSandboxIdleMemory/agents=100/sandbox=false-2       	       1	9878431524 ns/op	       220 children-pss-MB
PASS
`

func TestReport(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.values["internal/store/sqlite BenchmarkInboxAppend"]["msgs/s"]; len(got) != 3 || median(got) != 3100 {
		t.Fatalf("inbox append values %v", got)
	}
	var out strings.Builder
	report(&out, res)
	s := out.String()
	for _, want := range []string{
		"internal/store/sqlite BenchmarkInboxAppend",
		"OVER (1 of 3 runs)",                  // 1900 < 2000
		"internal/store/sqlite BenchmarkOpen", // no target: ns/op shown
		"cmd/troupe BenchmarkStartup",         // not run
		"MISSING",                             //
		"1.231×",                              // 1.6 / 1.3
		"internal/api BenchmarkFanout/subs=200 ÷ subs=10",
		// Named from where the two part; a ratio without a goal only shown.
		"cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=true ÷ agents=10/sandbox=true children-pss-MB",
		"6× ≤ 10×      PASS (sandboxed",
		"cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=true ÷ sandbox=false children-pss-MB",
		"1.091× -          shown (100",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "B/op") {
		t.Errorf("B/op shown for benchmarks with their own metrics or none:\n%s", s)
	}
}
