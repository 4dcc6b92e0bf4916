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
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "B/op") {
		t.Errorf("B/op shown for benchmarks with their own metrics or none:\n%s", s)
	}
}
