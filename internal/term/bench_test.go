package term

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// synthStream is a deterministic TUI-like stream of about size bytes at
// 120×40: what agent TUIs send (docs/engines/claude-code.md, "Terminal
// UI"): absolute and relative cursor moves, line erases, 256-colour SGR,
// wide characters, box drawing, OSC 0 titles and OSC 8 hyperlinks, spinner
// updates, and output that scrolls.
func synthStream(size int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"agent", "troupe", "build", "green", "test", "ask", "reply", "task", "memory", "diff",
		"日本語", "テキスト", "中文", "─────", "│", "┌──┐", "✻", "●", "❯", "⏵⏵", "é", "naïve"}
	var b bytes.Buffer
	b.Grow(size + 4096)
	line := func(n int) {
		for range n {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
	}
	for frame := 0; b.Len() < size; frame++ {
		switch frame % 4 {
		case 0: // a full repaint
			b.WriteString("\x1b[H")
			for row := 1; row <= 40; row++ {
				fmt.Fprintf(&b, "\x1b[%d;1H\x1b[38;5;%dm", row, r.IntN(256))
				line(r.IntN(10))
				b.WriteString("\x1b[0m\x1b[K")
			}
		case 1: // a spinner and a status line, by relative moves
			for i := 0; i < 20; i++ {
				fmt.Fprintf(&b, "\x1b[%dA\x1b[%dG%s\x1b[%dB", 1+r.IntN(5), 1+r.IntN(100), []string{"✻", "✳", "✶", "·"}[i%4], 1+r.IntN(5))
				fmt.Fprintf(&b, "\x1b[2K\x1b[1;2;38;5;%dmesc to interrupt\x1b[0m\x1b[%dC\x1b[%dD", r.IntN(256), r.IntN(30), r.IntN(30))
			}
		case 2: // output that scrolls
			b.WriteString("\x1b[40;1H")
			for i := 0; i < 15; i++ {
				b.WriteString("\r\n")
				line(3 + r.IntN(12))
			}
		case 3: // a title and a hyperlink
			fmt.Fprintf(&b, "\x1b]0;✳ frame %d\x07\x1b[%d;%dH\x1b]8;;https://example.invalid/%d\x1b\\link %d\x1b]8;;\x1b\\", frame, 1+r.IntN(40), 1+r.IntN(100), frame, frame)
		}
	}
	// A last repaint, so the final screen has text everywhere.
	b.WriteString("\x1b[H\x1b[2J")
	for row := 1; row <= 40; row++ {
		fmt.Fprintf(&b, "\x1b[%d;1H", row)
		line(8)
	}
	return b.Bytes()
}

// benchInput is a stream fed to the emulator, with its size.
type benchInput struct {
	name string
	data []byte
}

func benchInputs(t testing.TB) []benchInput {
	var ins []benchInput
	for _, name := range captures {
		ins = append(ins, benchInput{name, loadCapture(t, name).out})
	}
	return append(ins, benchInput{"synthetic-50MB", synthStream(50 << 20)})
}

// feed writes data in the PTY reader's chunks.
func feed(e *Emulator, data []byte) {
	for i := 0; i < len(data); i += 32 << 10 {
		e.Write(data[i:min(i+32<<10, len(data))])
	}
}

// BenchmarkEmulator is the emulator's throughput on the raw Claude Code
// captures and a 50 MB synthetic TUI stream, and, when the reference
// emulator is installed ($TROUPE_XTERM_DIR, which make test and make bench set),
// @xterm/headless on the same bytes: its MB/s (parse only, Node started
// beforehand), the speed ratio, and whether both final screens are the
// same text.
func BenchmarkEmulator(b *testing.B) {
	xdir := os.Getenv("TROUPE_XTERM_DIR")
	for _, in := range benchInputs(b) {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			// As on the xterm side, the emulator's construction is not
			// timed: a terminal agent's emulator lives as long as it does.
			var text string
			var wall, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				e := NewEmulator(120, 40, nil)
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				feed(e, in.data)
				text = e.Text()
				wall, cpu = wall+time.Since(start), cpu+cpuTime()-cpu0
				b.StopTimer()
				e.Close()
				b.StartTimer()
			}
			mb := float64(len(in.data)) * float64(b.N) / 1e6
			goMBs := mb / wall.Seconds()
			goCPU := mb / cpu.Seconds()
			b.ReportMetric(goCPU, "cpu-MB/s")
			if xdir == "" {
				return
			}
			b.StopTimer()
			repeat := 1
			if len(in.data) < 1<<20 {
				repeat = 20 // small inputs: past Node's JIT warm-up
			}
			x, err := runXterm(xdir, in.data, 120, 40, repeat)
			if err != nil {
				b.Fatal(err)
			}
			xMBs := float64(len(in.data)) / (x.MS / 1000) / 1e6
			xCPU := float64(len(in.data)) / (x.CPUMS / 1000) / 1e6
			b.ReportMetric(xMBs, "xterm-MB/s")
			b.ReportMetric(xCPU, "xterm-cpu-MB/s")
			b.ReportMetric(goMBs/xMBs, "speed-ratio")
			b.ReportMetric(goCPU/xCPU, "cpu-speed-ratio")
			same := 0.0
			if diff := screenDiff(text, x.Lines); diff == "" {
				same = 1
			} else {
				b.Logf("%s: final screens differ:\n%s", in.name, diff)
			}
			b.ReportMetric(same, "same-screen")
		})
	}
}

type xtermResult struct {
	MS    float64  `json:"ms"`
	CPUMS float64  `json:"cpuMs"`
	Lines []string `json:"lines"`
	RSS   int64    `json:"rss"`
}

// runXterm feeds data to @xterm/headless through testdata/xterm/screen.mjs.
func runXterm(dir string, data []byte, cols, rows, repeat int) (xtermResult, error) {
	var res xtermResult
	f, err := os.CreateTemp("", "term-bench-*.raw")
	if err != nil {
		return res, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		return res, err
	}
	f.Close()
	script, _ := filepath.Abs(filepath.Join("testdata", "xterm", "screen.mjs"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, f.Name(), strconv.Itoa(cols), strconv.Itoa(rows), strconv.Itoa(repeat))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return res, fmt.Errorf("run @xterm/headless: %w", err)
	}
	return res, json.Unmarshal(out, &res)
}

// screenDiff lists the rows where text and lines differ ("" when none),
// trailing spaces ignored.
func screenDiff(text string, lines []string) string {
	got := strings.Split(text, "\n")
	var d strings.Builder
	for y := range max(len(got), len(lines)) {
		var g, w string
		if y < len(got) {
			g = strings.TrimRight(got[y], " ")
		}
		if y < len(lines) {
			w = strings.TrimRight(lines[y], " ")
		}
		if g != w {
			fmt.Fprintf(&d, "row %d:\n  ours:  %q\n  xterm: %q\n", y, g, w)
		}
	}
	return d.String()
}

// TestXtermSameScreen checks the emulator against @xterm/headless (the
// test oracle) on the captures and a 1 MB synthetic stream. make test
// installs it and sets $TROUPE_XTERM_DIR; without it the test skips, except
// in CI (CI=true), where it fails.
func TestXtermSameScreen(t *testing.T) {
	xdir := xtermDir(t, os.Getenv)
	if xdir == "" {
		return
	}
	for _, name := range captures {
		data := loadCapture(t, name).out
		x, err := runXterm(xdir, data, 120, 40, 1)
		if err != nil {
			t.Fatal(err)
		}
		e := NewEmulator(120, 40, nil)
		feed(e, data)
		if d := screenDiff(e.Text(), x.Lines); d != "" {
			t.Errorf("%s: final screen differs from xterm's:\n%s", name, d)
		}
		e.Close()
	}
	data := synthStream(1 << 20)
	x, err := runXterm(xdir, data, 120, 40, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEmulator(120, 40, nil)
	defer e.Close()
	feed(e, data)
	if d := screenDiff(e.Text(), x.Lines); d != "" {
		t.Errorf("synthetic stream: final screen differs from xterm's:\n%s", d)
	}
}

// xtermDir is $TROUPE_XTERM_DIR, where @xterm/headless is installed; when
// it is unset, t is skipped, or failed in CI (CI=true), and "" returned.
func xtermDir(t testing.TB, getenv func(string) string) string {
	t.Helper()
	xdir := getenv("TROUPE_XTERM_DIR")
	if xdir != "" {
		return xdir
	}
	const why = "TROUPE_XTERM_DIR unset: make test installs @xterm/headless (make tools) and sets it"
	if getenv("CI") == "true" {
		t.Fatal(why + "; in CI the differential test must run")
	}
	t.Skip(why)
	return ""
}

// BenchmarkIdleTerminals is the memory of n idle terminal agents as troupe
// holds them: n programs on PTYs, each having drawn the Claude Code MCP
// capture (22 KB: a screen and scrollback), then waiting. Reported: the
// Go heap in use per terminal, the daemon-side RSS growth, goroutines and
// OS threads (the programs' own memory is not troupe's and not counted).
func BenchmarkIdleTerminals(b *testing.B) {
	const n = 100
	capture := filepath.Join(b.TempDir(), "screen.raw")
	if err := os.WriteFile(capture, loadCapture(b, "tui_mcp_flow").out, 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		rssBefore := rssKB()
		g0 := runtime.NumGoroutine()
		var ts []*Terminal
		for range n {
			t, err := Start(Options{Argv: []string{"/bin/sh", "-c", `cat "$1"; exec sleep 3600`, "sh", capture}, Env: []string{"PATH=" + os.Getenv("PATH")}, StopTimeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			ts = append(ts, t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for _, t := range ts {
			if _, err := t.WaitFor(ctx, func(s Screen) bool { return Contains(s.Text(), "Resume this session with") }); err != nil {
				b.Fatal(err)
			}
		}
		cancel()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n/1e6, "heap-MB/terminal")
		b.ReportMetric(float64(rssKB()-rssBefore)/1e3, "rss-growth-MB")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/terminal")
		b.ReportMetric(float64(threads()), "threads")
		for _, t := range ts {
			t.Signal(9)
		}
		for _, t := range ts {
			t.Close(context.Background())
		}
	}
}

func rssKB() int64 { return statusField("VmRSS:") }

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
func threads() int64 { return statusField("Threads:") }

func statusField(key string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// recordTB records what xtermDir asks of its test.
type recordTB struct {
	testing.TB
	fataled, skipped bool
}

func (r *recordTB) Helper()      {}
func (r *recordTB) Fatal(...any) { r.fataled = true }
func (r *recordTB) Skip(...any)  { r.skipped = true }
func (r *recordTB) Name() string { return "record" }

// TestXtermDirFailsInCI: without @xterm/headless the differential test
// fails in CI and skips elsewhere.
func TestXtermDirFailsInCI(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	r := &recordTB{TB: t}
	if dir := xtermDir(r, env(map[string]string{"CI": "true"})); dir != "" || !r.fataled {
		t.Errorf("CI=true, no TROUPE_XTERM_DIR: dir %q, failed %v; want a failure", dir, r.fataled)
	}
	r = &recordTB{TB: t}
	if xtermDir(r, env(nil)); r.fataled || !r.skipped {
		t.Errorf("outside CI, no TROUPE_XTERM_DIR: failed %v, skipped %v; want a skip", r.fataled, r.skipped)
	}
	r = &recordTB{TB: t}
	if dir := xtermDir(r, env(map[string]string{"CI": "true", "TROUPE_XTERM_DIR": "/x"})); dir != "/x" || r.fataled || r.skipped {
		t.Errorf("TROUPE_XTERM_DIR set: dir %q, failed %v, skipped %v", dir, r.fataled, r.skipped)
	}
}
