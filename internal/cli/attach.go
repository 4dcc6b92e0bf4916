package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/troupe-dev/troupe/internal/client"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// detachKey is the key that leaves an attached terminal: Ctrl-].
const detachKey = 0x1d

// attachCmd is `troupe attach AGENT`: the person's terminal on the
// agent's own TUI (mode = "terminal"), until Ctrl-].
func attachCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "attach AGENT",
		Short: "Put your terminal on a terminal-mode agent's own screen (detach with Ctrl-]; the team keeps working)",
		Long: `Attach your terminal to the TUI of an agent in terminal mode (mode = "terminal"),
starting its session if it is stopped. You see its screen and type into it; the
terminal follows your window's size. While you type, troupe does not write the
agent's queued messages: they wait for the next idle moment after you stop.
Ctrl-] detaches; the agent keeps running.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			return attach(cmd.Context(), g, cl, p.ID, troupe.AgentID(args[0]), os.Stdin, os.Stdout)
		},
	}
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func attach(ctx context.Context, g *globals, cl *client.Client, p troupe.ProjectID, agent troupe.AgentID, in, out *os.File) error {
	inFd, outFd := int(in.Fd()), int(out.Fd())
	saved, err := unix.IoctlGetTermios(inFd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("attach to %s: standard input is not a terminal: run troupe attach in a terminal", agent)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := cl.AttachTerminal(ctx, p, agent)
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Fprintf(g.stderr, "attached to %s (its terminal is %d×%d); Ctrl-] detaches\r\n", agent, a.Cols, a.Rows)

	raw := *saved
	makeRaw(&raw)
	if err := unix.IoctlSetTermios(inFd, unix.TCSETS, &raw); err != nil {
		return fmt.Errorf("attach: put the terminal in raw mode: %w", err)
	}
	defer unix.IoctlSetTermios(inFd, unix.TCSETS, saved)

	resize := func() {
		if ws, err := unix.IoctlGetWinsize(outFd, unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
			_ = a.Resize(ctx, int(ws.Col), int(ws.Row))
		}
	}
	resize()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	// Keys: read until Ctrl-]. The read of stdin cannot be interrupted;
	// the goroutine ends with the process (the CLI exits after attach).
	detached := make(chan struct{})
	go func() {
		defer close(detached)
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				b := buf[:n]
				i := bytes.IndexByte(b, detachKey)
				if i >= 0 {
					b = b[:i]
				}
				if len(b) > 0 && a.Type(ctx, b) != nil {
					return
				}
				if i >= 0 {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	outErr := make(chan error, 1)
	go func() {
		for {
			b, err := a.Read(ctx)
			if err != nil {
				outErr <- err
				return
			}
			if _, err := out.Write(b); err != nil {
				outErr <- err
				return
			}
		}
	}()
	for {
		select {
		case <-winch:
			resize()
		case <-detached:
			cancel()
			unix.IoctlSetTermios(inFd, unix.TCSETS, saved)
			fmt.Fprintf(g.stderr, "\r\ndetached from %s; it keeps running\n", agent)
			return nil
		case err := <-outErr:
			unix.IoctlSetTermios(inFd, unix.TCSETS, saved)
			if errors.Is(err, io.EOF) {
				fmt.Fprintf(g.stderr, "\r\n%s: %v\n", agent, safeText(err.Error()))
				return nil
			}
			return fmt.Errorf("attach to %s: %w", agent, err)
		}
	}
}

// makeRaw sets t as cfmakeraw(3) does: no echo, no line editing, no
// signals from keys (Ctrl-C goes to the agent), 8-bit bytes.
func makeRaw(t *unix.Termios) {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
}
