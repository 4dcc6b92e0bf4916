package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds the browser for the browser tests: Debian's chromium,
// which .ci/run installs. In CI its absence fails the test, never skips it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("TROUPE_CHROMIUM"), "/usr/bin/chromium", "chromium"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: .ci/run installs Debian's chromium for the browser tests")
	}
	t.Skip("chromium not installed (apt-get install chromium); CI runs this test")
	return ""
}

// TestBrowserWebUIShowsTheTeamAndTalksToIt drives the web UI in headless
// Chromium against a real daemon: the one-time login link, the team with
// live states, an ask answered in the page, the conversation, a task.
func TestBrowserWebUIShowsTheTeamAndTalksToIt(t *testing.T) {
	exe := chromium(t)
	state, proj := t.TempDir(), t.TempDir()
	writeTeam(t, proj, ownerTeam)
	d := startDaemon(t, state, "--project", proj)
	mustTroupe(t, state, proj, "task", "run", "echo from-the-ui-test")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first Run starts the browser, which lives as long as that call's
	// context: no timeout on it; the later steps get one.
	if err := chromedp.Do(bctx, chromedp.Navigate(d.login)); err != nil {
		t.Fatalf("open the login link: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
	defer cancelT()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}

	do("see the team", chromedp.WaitVisible(`#agents tr[data-agent="worker"]`))
	if states := text(`#agents tbody`); !strings.Contains(states, "lead") || !strings.Contains(states, "stopped") {
		t.Errorf("team table = %q", states)
	}
	do("ask the worker",
		chromedp.SetValue(`#to`, "worker"),
		chromedp.SendKeys(`#text`, "hello from the browser"),
		chromedp.Click(`#ask`),
		chromedp.WaitVisible(`//p[@id="answer" and contains(., "echo: hello from the browser")]`))
	if answer := text(`#answer`); answer != "echo: hello from the browser" {
		t.Errorf("answer = %q", answer)
	}
	do("see the reply in the conversation", chromedp.WaitVisible(`//ol[@id="messages"]//li[@data-kind="reply"]`))
	if conv := text(`#messages`); !strings.Contains(conv, "@person → worker") || !strings.Contains(conv, "hello from the browser") {
		t.Errorf("conversation = %q", conv)
	}
	// The conversation was read incrementally: the newest page once, then
	// only what came after it, never the whole project again.
	urls, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`performance.getEntriesByType("resource").map((e) => e.name).filter((n) => n.includes("/messages"))`))
	if err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, u := range urls {
		if !strings.Contains(u, "after=") {
			whole++
		}
	}
	if whole != 1 {
		t.Errorf("the page read the newest conversation page %d times, want once: %q", whole, urls)
	}
	if older, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("older").hidden`)); err != nil || !older {
		t.Errorf("the load-older button shows for a short conversation (hidden %v, %v)", older, err)
	}
	do("see the task", chromedp.WaitVisible(`//table[@id="tasks"]//td[contains(., "exited")]`))
	if tasks := text(`#tasks`); !strings.Contains(tasks, "echo from-the-ui-test") {
		t.Errorf("tasks = %q", tasks)
	}
	do("see the worker idle", chromedp.WaitVisible(`//tr[@data-agent="worker"]/td[contains(., "idle")]`))
	if out := os.Getenv("TROUPE_UI_SCREENSHOT"); out != "" { // a debugging knob: look at the page
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(out, png, 0o644)
	}
	// The login link was for one use only.
	do("reuse the login link", chromedp.Navigate(d.login))
	if body := text("body"); !strings.Contains(body, "already used") {
		t.Errorf("second use of the login link shows %q", body)
	}
}
