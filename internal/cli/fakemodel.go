package cli

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/fakemodel"
)

// What `troupe fakemodel` keeps of the requests it was sent (nothing reads
// them but its log): the newest cliKeepRequests, of cliKeepBytes at most.
const (
	cliKeepRequests = 100
	cliKeepBytes    = 64 << 20
	keepText        = "100 (64 MB at most)"
)

// fakemodelCmd serves the scripted model (internal/fakemodel) for dry runs
// of a real agent CLI with no API key.
func fakemodelCmd(g *globals) *cobra.Command {
	var addr, level string
	var allowRemote bool
	c := &cobra.Command{
		Use:   "fakemodel",
		Short: "Serve a scripted fake model (Anthropic and OpenAI APIs) for dry runs with no API key",
		Long: `Serve a scripted fake model on a loopback address until interrupted.

It speaks the Anthropic Messages API (Claude Code), the OpenAI Responses API
(Codex) and Chat Completions (OpenCode, OpenAI-compatible clients). Markers in
the prompt script the answer:

  [[text:X]]                 answer X (default: "Echo: <prompt>")
  [[tool:NAME {json}]]       call a tool the client offered (NAME* / *NAME: prefix / suffix)
  [[slow:3s every 500ms]]    stream the answer slowly
  [[sleep:5s]]               send nothing for 5s, then answer
  [[silent:5s]]              start the stream, then nothing for 5s
  [[error:529]]              fail with this HTTP status
  [[drop]]                   cut the connection mid-answer
  [[limit:30s]]              refuse with HTTP 429 (a usage limit, reset time given) for 30 s
  [[limit:30s quiet]]        the same, with no reset time given

It listens on loopback only: anyone who reaches it scripts its answers, and
what clients send it (prompts, keys) is in its memory. Another address
(0.0.0.0, a LAN address) needs --allow-remote. It keeps the newest ` + keepText + `
requests it was sent (one log line each at --log-level debug), dropping the oldest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger(level)
			if err != nil {
				return err
			}
			srv := fakemodel.New(fakemodel.Options{Logger: log, KeepRequests: cliKeepRequests, KeepBytes: cliKeepBytes, AllowRemote: allowRemote})
			if err := srv.Start(addr); err != nil {
				if errors.Is(err, fakemodel.ErrNotLoopback) {
					return fmt.Errorf("--addr %s is not a loopback address: anyone who reaches it would script the answers your agents get; use 127.0.0.1:PORT, or pass --allow-remote if you mean it", addr)
				}
				return err
			}
			defer srv.Close()
			u := srv.URL()
			fmt.Fprintf(g.out, "fake model at %s\n\nClaude Code:\n  ANTHROPIC_BASE_URL=%s ANTHROPIC_API_KEY=test CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n"+
				"Codex, OpenCode, OpenAI clients:\n  OPENAI_BASE_URL=%s/v1 OPENAI_API_KEY=test\n\nCtrl-C stops it.\n", u, u, u)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			<-ctx.Done()
			return srv.Close()
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8765", "address to listen on (a loopback address unless --allow-remote)")
	c.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow an --addr beyond loopback (0.0.0.0, a LAN address)")
	c.Flags().StringVar(&level, "log-level", "debug", "log level: debug (one line per request), info, warn, error")
	return c
}
