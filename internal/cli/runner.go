package cli

import (
	"fmt"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/bus"
	"github.com/troupe-dev/troupe/internal/daemon"
	"github.com/troupe-dev/troupe/internal/remote"
	"github.com/troupe-dev/troupe/internal/statedir"
)

// runnerCmd is `troupe runner`: run the agents a daemon on another
// machine assigns to this one; its subcommands mint and revoke runners'
// credentials on the daemon.
func runnerCmd(g *globals) *cobra.Command {
	var server, credsFile, name, labels, root, level string
	var maxAgents int
	c := &cobra.Command{
		Use:   "runner --creds FILE [--server URL] [--name NAME] [--labels l1,l2] [--root DIR] [--max-agents N]",
		Short: "Run agents of a daemon on another machine (or mint and revoke runners' credentials)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if credsFile == "" {
				return fmt.Errorf("--creds: missing: give the file `troupe runner add NAME` wrote on the daemon's machine")
			}
			credsFile, err := filepath.Abs(credsFile)
			if err != nil {
				return fmt.Errorf("--creds: %w", err)
			}
			if real, err := filepath.EvalSymlinks(credsFile); err == nil {
				credsFile = real // hidden from the agents where it really is
			}
			creds, err := bus.ReadCreds(credsFile)
			if err != nil {
				return err
			}
			if server != "" {
				creds.URL = server
			}
			if name != "" && name != creds.Name {
				return fmt.Errorf("--name: %q, but %s holds runner %q's credentials: drop --name or use that runner's file", name, credsFile, creds.Name)
			}
			ls, err := daemon.ParseLabels(labels)
			if err != nil {
				return err
			}
			if maxAgents < 1 {
				return fmt.Errorf("--max-agents: %d is not a limit: give 1 or more", maxAgents)
			}
			if root == "" {
				d, err := statedir.Default()
				if err != nil {
					return err
				}
				root = filepath.Join(d, "runner")
			}
			if root, err = filepath.Abs(root); err != nil {
				return fmt.Errorf("--root: %w", err)
			}
			log, err := g.logger(level)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(g.out, "runner %s connecting to %s (root %s)\n", creds.Name, creds.URL, root)
			return daemon.RunRunner(ctx, daemon.RunnerConfig{Creds: creds, CredsFile: credsFile, Labels: ls, Root: root, MaxAgents: maxAgents, Logger: log})
		},
	}
	c.AddCommand(runnerAdminCmds(g)...)
	c.Flags().StringVar(&server, "server", "", "the daemon's bus URL (default: the one in the credentials file)")
	c.Flags().StringVar(&credsFile, "creds", "", "the runner's credentials file, from 'troupe runner add NAME' on the daemon's machine")
	c.Flags().StringVar(&name, "name", "", "the runner's name (default: the credentials file's)")
	c.Flags().StringVar(&labels, "labels", "", "labels agents may ask for with runner_labels, comma separated")
	c.Flags().StringVar(&root, "root", "", "where the runner keeps its clones of projects and its agents' worktrees (default <state dir>/runner)")
	c.Flags().IntVar(&maxAgents, "max-agents", remote.DefaultMaxAgents, "agent sessions this runner runs at once")
	c.Flags().StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	return c
}
