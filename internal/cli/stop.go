package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/pidfd"
)

// stopResult is troupe stop's answer (--json).
type stopResult struct {
	// Running says whether a daemon answered; Stopped that it exited.
	Running bool   `json:"running"`
	Stopped bool   `json:"stopped"`
	PID     int    `json:"pid,omitempty"`
	Message string `json:"message"`
}

func stopCmd(g *globals) *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "stop",
		Short: "Stop the running daemon cleanly and wait for it to exit (exit 0; also when none runs)",
		Long: "Ask the daemon of the state dir to stop, through its API and token, as Ctrl-C would: it stops\n" +
			"its agents' sessions (background tasks keep running and are adopted by the next daemon), then\n" +
			"exits; troupe stop waits for that, up to --wait. When no daemon runs it says so and exits 0.\n" +
			"A daemon run by troupe service is restarted by systemd only when it fails: troupe stop keeps\n" +
			"it stopped until systemctl --user start troupe or the next login.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := stopDaemon(cmd.Context(), g, wait)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(res)
			}
			fmt.Fprintln(g.out, res.Message)
			return nil
		},
	}
	c.Flags().DurationVar(&wait, "wait", time.Minute, "how long to wait for the daemon to exit")
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return c
}

// stopDaemon asks the daemon to stop and waits for its process to exit.
func stopDaemon(ctx context.Context, g *globals, wait time.Duration) (stopResult, error) {
	dir, err := g.dir()
	if err != nil {
		return stopResult{}, err
	}
	notRunning := stopResult{Message: "no troupe daemon is running (state dir " + dir + "): nothing to stop"}
	cl, err := g.client()
	if errors.Is(err, client.ErrNotRunning) {
		return notRunning, nil
	}
	if err != nil {
		return stopResult{}, err
	}
	st, err := cl.Status(ctx)
	if errors.Is(err, client.ErrNotRunning) {
		return notRunning, nil
	}
	if err != nil {
		return stopResult{}, err
	}
	// The handle is taken before the daemon is asked: it pins that
	// process, so its pid cannot be another's by the time it is waited on.
	proc, perr := pidfd.Open(st.PID)
	if perr != nil && !errors.Is(perr, unix.ESRCH) {
		return stopResult{}, fmt.Errorf("stop daemon: watch pid %d: %w", st.PID, perr)
	}
	if proc != nil {
		defer proc.Close()
	}
	if _, err := cl.Shutdown(ctx); errors.Is(err, client.ErrNotRunning) {
		return notRunning, nil
	} else if err != nil {
		return stopResult{}, fmt.Errorf("stop daemon (pid %d): %w", st.PID, err)
	}
	res := stopResult{Running: true, Stopped: true, PID: st.PID, Message: fmt.Sprintf("troupe daemon (pid %d) stopped", st.PID)}
	if proc == nil {
		return res, nil // gone already
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := proc.Wait(wctx); err != nil {
		return stopResult{}, fmt.Errorf("stop daemon: pid %d did not exit within %v: it is still stopping its agents' sessions; wait and run troupe stop again, or kill %d", st.PID, wait, st.PID)
	}
	return res, nil
}
