package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/internal/events"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// fanoutChildEnv, when set in the environment (to the server's URL), makes
// the test binary a fan-out client (fanoutChild) instead of running tests.
const fanoutChildEnv = "TROUPE_FANOUT_CHILD"

func TestMain(m *testing.M) {
	if url := os.Getenv(fanoutChildEnv); url != "" {
		n, _ := strconv.Atoi(os.Getenv("TROUPE_FANOUT_SUBS"))
		os.Exit(fanoutChild(url, n))
	}
	os.Exit(m.Run())
}

// tick is the benchmark's event: its publish time (unix ns) and a payload
// about the size of an agent.output line.
type tick struct {
	T   int64  `json:"t"`
	Pad string `json:"pad"`
}

func (tick) EventType() events.Type { return "bench.tick" }

// fanoutBurst is how many events the benchmark publishes before it waits
// for every subscriber to have them all (well under the hub's per-subscriber
// buffer, so no subscriber is cut off).
const fanoutBurst = 50

// BenchmarkFanout: one hub and the API's SSE handler over real HTTP on
// 127.0.0.1, with N subscribers in a child process (so the daemon side's
// CPU is this process's alone). Each iteration publishes a burst of
// fanoutBurst events (~200 bytes of data each) and waits until every
// subscriber has received the last of them. Reported: this process's CPU
// (user+system) per event per subscriber, events published and delivered
// to all per second, and the lag from Publish to receipt (the child's
// clock is the same machine's) over every event and subscriber, p50 and
// p99. Run at two sizes; the ratio big/small of cpu-us/ev/sub is the
// per-subscriber scaling (goal ≤ 1.5×).
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{10, 200} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
}

func benchFanout(b *testing.B, subs int) {
	f := newFixture(b)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fanoutChildEnv+"="+f.ts.URL+"/api/events?since="+strconv.FormatUint(f.hub.Last(), 10),
		"TROUPE_FANOUT_SUBS="+strconv.Itoa(subs))
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	out := bufio.NewScanner(outPipe)
	expect := func(prefix string) string {
		if !out.Scan() {
			b.Fatalf("fan-out child: %v (want %q)", out.Err(), prefix)
		}
		line := out.Text()
		if !strings.HasPrefix(line, prefix) {
			b.Fatalf("fan-out child said %q, want %q", line, prefix)
		}
		return strings.TrimPrefix(line, prefix)
	}
	expect("ready")
	pad := strings.Repeat("x", 160)
	key := troupe.RuntimeKey{Project: "p", Agent: "a"}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	published := 0
	for b.Loop() {
		var last uint64
		for range fanoutBurst {
			last = f.hub.Publish(key, tick{T: time.Now().UnixNano(), Pad: pad})
		}
		published += fanoutBurst
		fmt.Fprintf(in, "%d\n", last)
		expect("ok")
	}
	elapsed := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	fmt.Fprintf(in, "done\n")
	var p50, p99 float64
	var cut int
	fmt.Sscan(expect("lag"), &p50, &p99, &cut)
	if cut > 0 {
		b.Fatalf("%d subscribers were cut off", cut)
	}
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(published*subs), "cpu-us/ev/sub")
	b.ReportMetric(float64(published)/elapsed.Seconds(), "events/s")
	b.ReportMetric(p50, "p50-lag-ms")
	b.ReportMetric(p99, "p99-lag-ms")
}

// fanoutChild opens n event streams at url and reads them. For each line
// "S" on stdin it answers "ok" once every stream has received event S; on
// "done" it prints "lag P50 P99 CUT": the lag percentiles in ms of every
// event on every stream (publish time in the data to receipt) and how many
// streams ended early.
func fanoutChild(url string, n int) int {
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		last   = make([]uint64, n)
		lags   = make([][]int64, n)
		ended  int
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	)
	var ready sync.WaitGroup
	for i := range n {
		ready.Add(1)
		go func() {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			ready.Done()
			if err != nil {
				fmt.Fprintln(os.Stderr, "fan-out child:", err)
				mu.Lock()
				ended++
				cond.Broadcast()
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReaderSize(resp.Body, 64<<10)
			var seq uint64
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					if err != io.EOF {
						fmt.Fprintln(os.Stderr, "fan-out child:", err)
					}
					break
				}
				now := time.Now().UnixNano()
				switch {
				case bytes.HasPrefix(line, []byte("id: ")):
					seq, _ = strconv.ParseUint(string(bytes.TrimSpace(line[4:])), 10, 64)
				case bytes.HasPrefix(line, []byte("data: ")):
					j := bytes.Index(line, []byte(`"t":`))
					if j < 0 {
						continue
					}
					k := j + 4
					for k < len(line) && line[k] >= '0' && line[k] <= '9' {
						k++
					}
					t, _ := strconv.ParseInt(string(line[j+4:k]), 10, 64)
					lags[i] = append(lags[i], now-t)
					mu.Lock()
					last[i] = seq
					cond.Broadcast()
					mu.Unlock()
				}
			}
			mu.Lock()
			ended++
			cond.Broadcast()
			mu.Unlock()
		}()
	}
	ready.Wait()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "done" {
			break
		}
		want, _ := strconv.ParseUint(in.Text(), 10, 64)
		mu.Lock()
		for ended == 0 && slices.Min(last) < want {
			cond.Wait()
		}
		mu.Unlock()
		fmt.Println("ok")
	}
	mu.Lock()
	defer mu.Unlock()
	var all []int64
	for _, l := range lags {
		all = append(all, l...)
	}
	slices.Sort(all)
	q := func(f float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(f*float64(len(all)-1))]) / 1e6
	}
	fmt.Printf("lag %.3f %.3f %d\n", q(0.5), q(0.99), ended)
	return 0
}
