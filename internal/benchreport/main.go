// Command benchreport reads the output of `go test -bench` (bench.out, as
// `make bench` writes it) and prints each figure — the median over the runs
// of a benchmark, with the range — beside its target from BENCHMARKS.md and
// docs/TARGETS.md, PASS or OVER, then the big/small ratios of the benchmarks
// run at two sizes.
//
// A target is met (PASS) only when every run meets it, so three runs in a
// row are three chances to miss. It is a build and benchmark tool of this
// repository: nothing imports it, and it uses the standard library only.
//
// Usage: go run ./internal/benchreport [bench.out]
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// target is a bound on one metric of one benchmark: a maximum, or with
// min set a minimum.
type target struct {
	bench  string // "pkg/path BenchmarkName[/sub]", pkg relative to the module
	metric string
	value  float64
	min    bool // the metric must be at least value (a rate), not at most
	note   string
}

// targets are BENCHMARKS.md's table (docs/TARGETS.md).
var targets = []target{
	{bench: "cmd/troupe BenchmarkStartup", metric: "p50-ms", value: 200},
	{bench: "cmd/troupe BenchmarkIdleAgentsThreadsAndMemory/agents=200", metric: "cpu-%", value: 1, note: "~0 %"},
	{bench: "cmd/troupe BenchmarkIdleAgentsThreadsAndMemory/agents=200", metric: "daemon-rss-MB", value: 150},
	{bench: "cmd/troupe BenchmarkClaudeWarmTurn", metric: "p50-ms", value: 200},
	{bench: "internal/store/sqlite BenchmarkMemoryBriefing/notes=10000", metric: "bytes", value: 8192},
	{bench: "cmd/troupe BenchmarkTaskExitToOwnerTurn", metric: "p99-ms", value: 50},
	{bench: "cmd/troupe BenchmarkCheckRun", metric: "p50-ms", value: 50, note: "a check of `true`, request to result"},
	{bench: "internal/runtime BenchmarkAskRoundTrip", metric: "p50-ms", value: 2},
	{bench: "internal/runtime BenchmarkAskRoundTrip", metric: "p99-ms", value: 10},
	{bench: "internal/mcp BenchmarkMCPAskRoundTrip", metric: "p50-ms", value: 2},
	{bench: "internal/mcp BenchmarkMCPAskRoundTrip", metric: "p99-ms", value: 10},
	{bench: "internal/mcp BenchmarkMCPListAgents", metric: "p50-ms", value: 1.5},
	{bench: "internal/runtime BenchmarkWakeLatency", metric: "p99-ms", value: 50},
	{bench: "internal/sandbox BenchmarkStart/mechanism=bubblewrap", metric: "p50-ms", value: 20},
	{bench: "cmd/troupe BenchmarkSandboxWarmTurn/engine=fake", metric: "on/off", value: 1.2, note: "a warm turn no slower in the sandbox"},
	{bench: "internal/engine/fake BenchmarkEchoTurnSandbox", metric: "on/off", value: 1.2, note: "a fake agent's turn no slower in the sandbox"},
	{bench: "cmd/troupe BenchmarkSandboxWarmTurn/engine=openai", metric: "on-off-ms", value: 20, note: "one sandboxed run_command: its start cost"},
	{bench: "internal/store/sqlite BenchmarkInboxAppend", metric: "msgs/s", value: 2000, min: true},
	{bench: "cmd/troupe BenchmarkRunnerAsk", metric: "remote-local-ms", value: 2, note: "what an ask to an agent on a runner adds, loopback"},
	{bench: "cmd/troupe BenchmarkWebFirstLoad", metric: "p50-ms", value: 300},
	{bench: "internal/worktree BenchmarkCheckpoint/files=10000/changed=1", metric: "end-p50-ms", value: 50, note: "a turn's checkpoint, 10,000 files, one changed"},
	{bench: "cmd/troupe BenchmarkWebEventBurst", metric: "p99-ms", value: 100},
	{bench: "cmd/troupe BenchmarkWebEventBurst", metric: "events/s", value: 1000, min: true, note: "the burst's rate"},
	{bench: "internal/engine/openai BenchmarkLoopStep/store=mem", metric: "p50-ms", value: 1},
	{bench: "internal/engine/openai BenchmarkLoopStep/store=mem", metric: "p99-ms", value: 1},
	{bench: "internal/engine/openai BenchmarkLoopStep/store=sqlite", metric: "p50-ms", value: 1},
	{bench: "internal/claudesessions BenchmarkClaudeIndexCold/sessions=10000/size=2GB/read=headtail", metric: "ms/op", value: 3000},
	{bench: "internal/claudesessions BenchmarkClaudeListWarm/sessions=10000/size=2GB/watched=true", metric: "ms/op", value: 100},
	{bench: "internal/claudesessions BenchmarkClaudeAppendReread/sessions=10000/size=2GB", metric: "ms/op", value: 5},
	{bench: "internal/term BenchmarkEmulator/synthetic-50MB", metric: "cpu-speed-ratio", value: 1, min: true, note: "≥ 1× @xterm/headless (goal 2×), CPU time"},
	{bench: "internal/term BenchmarkEmulator/synthetic-50MB", metric: "same-screen", value: 1, min: true, note: "the same final screen text as @xterm/headless"},
	{bench: "internal/term BenchmarkEmulator/tui_mcp_flow", metric: "same-screen", value: 1, min: true},
	{bench: "internal/term BenchmarkEmulator/tui_trust_flow", metric: "same-screen", value: 1, min: true},
}

// ratio compares a benchmark run at two sizes (or two ways): the median of
// metric at the big size over the median at the small one should be at
// most value. With neither value nor min the ratio is only shown.
type ratio struct {
	big, small string
	metric     string
	value      float64 // the most the ratio may be
	min        float64 // when set, the least it must be instead
	note       string
}

// goal is how r's bound reads.
func (r ratio) goal() string {
	if r.value == 0 && r.min == 0 {
		return "-"
	}
	if r.min > 0 {
		return "≥ " + num(r.min) + "×"
	}
	return "≤ " + num(r.value) + "×"
}

var ratios = []ratio{
	{big: "cmd/troupe BenchmarkClaudeProcessPerTurn", small: "cmd/troupe BenchmarkClaudeWarmTurn",
		metric: "p50-ms", min: 3, note: "a process per turn ÷ a warm turn"},
	{big: "cmd/troupe BenchmarkCodexExecPerTurn", small: "cmd/troupe BenchmarkCodexWarmTurn",
		metric: "p50-ms", min: 1, note: "codex exec per turn ÷ a warm Codex turn"},
	{big: "cmd/troupe BenchmarkOpenCodeRunPerTurn", small: "cmd/troupe BenchmarkOpenCodeWarmTurn",
		metric: "p50-ms", min: 1, note: "opencode run per turn ÷ a warm OpenCode turn"},
	{big: "cmd/troupe BenchmarkIdleAgentsThreadsAndMemory/agents=200", small: "cmd/troupe BenchmarkIdleAgentsThreadsAndMemory/agents=50",
		metric: "daemon-threads", value: 1.5, note: "no thread per child"},
	{big: "cmd/troupe BenchmarkQueueDrain/100000", small: "cmd/troupe BenchmarkQueueDrain/10000",
		metric: "drain-s", value: 15, note: "linear: 10× the messages"},
	{big: "cmd/troupe BenchmarkQueueDrain/100000", small: "cmd/troupe BenchmarkQueueDrain/10000",
		metric: "queued-rss-MB", value: 1.5, note: "flat"},
	{big: "internal/store/sqlite BenchmarkConversationNewest/messages=1000000/store/project", small: "internal/store/sqlite BenchmarkConversationNewest/messages=10000/store/project",
		metric: "ns/op", value: 1.5, note: "paging"},
	{big: "internal/store/sqlite BenchmarkConversationNewest/messages=1000000/store/agent", small: "internal/store/sqlite BenchmarkConversationNewest/messages=10000/store/agent",
		metric: "ns/op", value: 1.5, note: "paging, one agent"},
	{big: "internal/store/sqlite BenchmarkMemorySearch/notes=10000/watched", small: "internal/store/sqlite BenchmarkMemorySearch/notes=100/watched",
		metric: "p50-ms", value: 1.5, note: "memory search"},
	{big: "internal/api BenchmarkFanout/subs=200", small: "internal/api BenchmarkFanout/subs=10",
		metric: "cpu-us/ev/sub", value: 1.5, note: "per subscriber"},
	{big: "internal/runtime BenchmarkSessionStart/agents=100", small: "internal/runtime BenchmarkSessionStart/agents=10",
		metric: "ms/start-all", value: 10, note: "linear: 10× the agents"},
	{big: "internal/runtime BenchmarkSessionStart/agents=100", small: "internal/runtime BenchmarkSessionStart/agents=10",
		metric: "cpu-ms/agent", value: 1.2, note: "CPU per session start, flat"},
	{big: "cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=true", small: "cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=false",
		metric: "children-pss-MB", note: "100 idle agents' processes, sandboxed ÷ not"},
	{big: "cmd/troupe BenchmarkSandboxIdleMemory/agents=10/sandbox=true", small: "cmd/troupe BenchmarkSandboxIdleMemory/agents=10/sandbox=false",
		metric: "children-pss-MB", note: "10 idle agents' processes, sandboxed ÷ not"},
	{big: "cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=true", small: "cmd/troupe BenchmarkSandboxIdleMemory/agents=10/sandbox=true",
		metric: "children-pss-MB", value: 10, note: "sandboxed: linear at most, 10× the agents"},
	{big: "cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=false", small: "cmd/troupe BenchmarkSandboxIdleMemory/agents=10/sandbox=false",
		metric: "children-pss-MB", value: 10, note: "unsandboxed: linear at most, 10× the agents"},
	{big: "cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=true", small: "cmd/troupe BenchmarkSandboxIdleMemory/agents=100/sandbox=false",
		metric: "start-all-s", note: "100 sessions started, sandboxed ÷ not"},
	{big: "cmd/troupe BenchmarkRunnerQueueDrain/10000/where=runner", small: "cmd/troupe BenchmarkRunnerQueueDrain/10000/where=local",
		metric: "drain-s", note: "10,000 queued, drained on a runner ÷ locally"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=20",
		metric: "daemon-threads", value: 1.5, note: "no daemon thread per remote agent"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=20",
		metric: "runner-threads", value: 2, note: "no runner thread per agent (one each would be 5×)"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=20",
		metric: "daemon-rss-MB", note: "daemon RSS, 5× the remote agents"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=20",
		metric: "runner-rss-MB", note: "runner RSS, 5× the agents"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=20",
		metric: "runner-children-pss-MB", value: 5, note: "the agents' processes: linear at most, 5× the agents"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100,runners=4", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=20,runners=4",
		metric: "daemon-threads", value: 1.5, note: "4 runners: no daemon thread per remote agent"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100,runners=4", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100",
		metric: "daemon-rss-MB", note: "100 agents, daemon RSS: 4 runners ÷ 1"},
	{big: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100,runners=4", small: "cmd/troupe BenchmarkRunnerIdleAgents/agents=100",
		metric: "runner-rss-MB", note: "100 agents, the largest runner's RSS: 4 runners ÷ 1"},
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	res, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(2)
	}
	report(os.Stdout, res)
}

// results holds every value of every metric of every benchmark, in the
// order the benchmarks first appeared.
type results struct {
	order  []string
	values map[string]map[string][]float64 // bench → metric → one value per run
	units  map[string][]string             // bench → metrics in order
}

const module = "github.com/troupe-dev/troupe/"

// parse reads `go test -bench` output.
func parse(r io.Reader) (*results, error) {
	res := &results{values: map[string]map[string][]float64{}, units: map[string][]string{}}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), module)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a benchmark's log line, not its result
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		bench := pkg + " " + name
		if _, ok := res.values[bench]; !ok {
			res.order = append(res.order, bench)
			res.values[bench] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("parse %q: %w", line, err)
			}
			unit := f[i+1]
			if _, ok := res.values[bench][unit]; !ok {
				res.units[bench] = append(res.units[bench], unit)
			}
			res.values[bench][unit] = append(res.values[bench][unit], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmarks: %w", err)
	}
	return res, nil
}

func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// num prints v with 4 significant digits, whole numbers in full.
func num(v float64) string {
	if v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// report prints every figure, then the targets missed or not found, then
// the ratios.
func report(w io.Writer, res *results) {
	fmt.Fprintf(w, "%-58s %-14s %10s %-25s %-3s %-10s %s\n", "benchmark", "metric", "median", "range", "n", "target", "verdict")
	found := map[int]bool{}
	for _, bench := range res.order {
		units := res.units[bench]
		own := slices.ContainsFunc(units, func(u string) bool {
			return u != "ns/op" && u != "B/op" && u != "allocs/op" && u != "MB"
		})
		for _, unit := range units {
			if unit == "B/op" || unit == "allocs/op" || (own && unit == "ns/op") {
				continue // memory is not a target here; a benchmark's own figures say it better
			}
			vs := res.values[bench][unit]
			tgt, verdict := "", ""
			for i, t := range targets {
				if t.bench != bench || t.metric != unit {
					continue
				}
				found[i] = true
				tgt, verdict = bound(t), judge(t, vs)
			}
			fmt.Fprintf(w, "%-58s %-14s %10s %-25s %-3d %-10s %s\n", bench, unit, num(median(vs)),
				num(slices.Min(vs))+"–"+num(slices.Max(vs)), len(vs), tgt, verdict)
		}
	}
	for i, t := range targets {
		if !found[i] {
			fmt.Fprintf(w, "%-58s %-14s %10s %-25s %-3d %-10s %s\n", t.bench, t.metric, "-", "", 0, bound(t), "MISSING")
		}
	}
	fmt.Fprintf(w, "\n%-58s %-14s %10s %-10s %s\n", "ratio big/small", "metric", "ratio", "goal", "verdict")
	for _, r := range ratios {
		b, s := res.values[r.big][r.metric], res.values[r.small][r.metric]
		name := r.big + " ÷ " + shortName(r.big, r.small)
		if len(b) == 0 || len(s) == 0 {
			fmt.Fprintf(w, "%-58s %-14s %10s %-10s %s\n", name, r.metric, "-", r.goal(), "MISSING")
			continue
		}
		q := median(b) / median(s)
		verdict := "PASS"
		switch {
		case r.value == 0 && r.min == 0:
			verdict = "shown"
		case r.min > 0 && q < r.min:
			verdict = "UNDER"
		case r.min == 0 && q > r.value:
			verdict = "OVER"
		}
		fmt.Fprintf(w, "%-58s %-14s %10s %-10s %s (%s)\n", name, r.metric, num(q)+"×", r.goal(), verdict, r.note)
	}
}

// shortName is small as the ratio's name gives it after big: from the
// path element where the two names part.
func shortName(big, small string) string {
	i := 0
	for i < len(big) && i < len(small) && big[i] == small[i] {
		i++
	}
	return small[strings.LastIndexByte(small[:i], '/')+1:]
}

func bound(t target) string {
	if t.min {
		return "≥ " + num(t.value)
	}
	return "≤ " + num(t.value)
}

// judge is PASS when every run meets t, else OVER with how many missed.
func judge(t target, vs []float64) string {
	miss := 0
	for _, v := range vs {
		if (t.min && v < t.value) || (!t.min && v > t.value) {
			miss++
		}
	}
	if miss == 0 {
		return "PASS"
	}
	return fmt.Sprintf("OVER (%d of %d runs)", miss, len(vs))
}
