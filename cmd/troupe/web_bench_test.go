package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// BenchmarkWebFirstLoad: the web UI's first load on loopback with a cold
// browser cache (cleared before each load), from navigation start to the
// first render holding the team and the conversation (the page's
// "troupe:ready" mark); and the bytes it downloaded (HTML, JS, CSS and the
// API answers, as transferred: gzip where accepted).
func BenchmarkWebFirstLoad(b *testing.B) {
	state, proj := b.TempDir(), b.TempDir()
	writeTeam(b, proj, ownerTeam)
	d := startDaemon(b, state, "--project", proj)
	cl, err := client.FromStateDir(state)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	info, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		if _, err := cl.Ask(ctx, info.ID, "worker", fmt.Sprintf("question %d", i), 10); err != nil {
			b.Fatal(err)
		}
	}
	p := newPage(b, d.login)
	url := "http://" + d.addr + "/#/p/" + string(info.ID) + "/conversation"
	clear := chromedp.Action[chromedp.Void](func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, network.ClearBrowserCache, cdp.Empty{})
		return chromedp.Void{}, err
	})
	var ds []float64
	var bytes float64
	b.ResetTimer()
	for range b.N {
		p.do("clear the cache and load", chromedp.Navigate("about:blank"), clear, chromedp.Navigate(url))
		p.wait("the page ready", `performance.getEntriesByName("troupe:ready").length && document.querySelectorAll("#messages li").length === 40`, 20*time.Second)
		ds = append(ds, eval[float64](p, `performance.getEntriesByName("troupe:ready")[0].startTime`))
		if os.Getenv("TROUPE_BENCH_TIMELINE") != "" {
			b.Log(eval[string](p, `JSON.stringify(performance.getEntries().map(e => [e.name.replace(/^http:\/\/[^/]+/, ""), Math.round(e.startTime), Math.round(e.duration)]))`))
		}
		bytes = eval[float64](p, `performance.getEntriesByType("navigation")[0].transferSize + performance.getEntriesByType("resource").filter(e => !e.name.includes("/api/events")).reduce((n, e) => n + e.transferSize, 0)`)
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(ds[len(ds)/2], "p50-ms")
	b.ReportMetric(ds[len(ds)-1], "max-ms")
	b.ReportMetric(bytes, "bytes/load")
}

// BenchmarkWebEventBurst: two agents each stream 2,000 output chunks in
// about 2 s (the fake engine's "!stream 2s 1ms": some 700 events/s each)
// while the page shows one of them's live transcript. Keys are pressed every 25 ms during
// the burst; input latency is from a key event's timestamp to the frame
// after its handler ran (the page busy rendering the burst delays both).
// A Go client follows the same project-scoped event stream the page
// follows and counts its bytes per event; the page's fetches during the
// burst are counted too (the burst should need none: the events carry the
// text).
func BenchmarkWebEventBurst(b *testing.B) {
	state, proj := b.TempDir(), b.TempDir()
	writeTeam(b, proj, ownerTeam)
	d := startDaemon(b, state, "--project", proj)
	cl, err := client.FromStateDir(state)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	info, err := cl.ResolveProject(ctx, proj)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := os.ReadFile(state + "/token")
	if err != nil {
		b.Fatal(err)
	}
	p := newPage(b, d.login)
	p.wait("the page ready", `performance.getEntriesByName("troupe:ready").length`, 20*time.Second)
	eval[bool](p, `(location.hash = "#/p/`+string(info.ID)+`/agent/worker", true)`)
	p.wait("the agent view", `document.querySelector("#agent")`, 20*time.Second)
	eval[bool](p, `(window.lat = [], addEventListener("keydown", (e) => { const t0 = e.timeStamp; requestAnimationFrame(() => lat.push(performance.now() - t0)); }), true)`)

	var lat []float64
	var events, frameBytes int
	var rate []float64
	fetches := 0
	b.ResetTimer()
	for range b.N {
		// The stream the page follows, read raw.
		st, err := cl.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(sctx, "GET", fmt.Sprintf("http://%s/api/events?project=%s&since=%d", d.addr, info.ID, st.LastEvent), nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		type count struct {
			events, bytes int
			first, last   time.Time
		}
		done := make(chan count, 1)
		go func() {
			var c count
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			inFrame, ended := 0, 0
			for sc.Scan() {
				l := sc.Text()
				inFrame += len(l) + 1
				if l == "" {
					inFrame = 0
					continue
				}
				if strings.HasPrefix(l, "event: agent.output") {
					c.events++
					if c.first.IsZero() {
						c.first = time.Now()
					}
				}
				if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"type":"agent.output"`) {
					c.bytes += inFrame + 1 // this frame's lines and its blank line
					c.last = time.Now()
				}
				if strings.HasPrefix(l, "event: turn.ended") {
					if ended++; ended == 2 {
						break
					}
				}
			}
			done <- c
		}()
		before := eval[float64](p, `performance.getEntriesByType("resource").length`)
		eval[bool](p, `(lat.length = 0, true)`)
		for _, a := range []troupe.AgentID{"worker", "lead"} { // two streams: over 1,000 events/s
			if _, err := cl.Send(ctx, info.ID, a, "!stream 2s 1ms"); err != nil {
				b.Fatal(err)
			}
		}
		var c count
		for waiting := true; waiting; {
			select {
			case c = <-done:
				waiting = false
			case <-time.After(25 * time.Millisecond):
				p.do("press a key", chromedp.KeyEvent("a"))
			}
		}
		stop()
		resp.Body.Close()
		lat = append(lat, eval[[]float64](p, "lat.slice()")...)
		fetches += int(eval[float64](p, `performance.getEntriesByType("resource").length`) - before)
		events += c.events
		frameBytes += c.bytes
		if s := c.last.Sub(c.first).Seconds(); s > 0 {
			rate = append(rate, float64(c.events)/s)
		}
	}
	b.StopTimer()
	if len(lat) == 0 || events == 0 {
		b.Fatalf("no latency samples (%d) or no events (%d)", len(lat), events)
	}
	slices.Sort(lat)
	slices.Sort(rate)
	b.ReportMetric(lat[len(lat)/2], "p50-ms")
	b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
	b.ReportMetric(lat[len(lat)-1], "max-ms")
	b.ReportMetric(float64(frameBytes)/float64(events), "bytes/event")
	b.ReportMetric(rate[len(rate)/2], "events/s")
	b.ReportMetric(float64(fetches)/float64(b.N), "fetches/burst")
}
