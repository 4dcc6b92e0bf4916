package cli

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/mcp"
	"github.com/troupe-dev/troupe/internal/task"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func tasksCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "tasks",
		Short: "List the project's background tasks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			ts, err := cl.Tasks(cmd.Context(), p.ID)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"tasks": ts})
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tOWNER\tSTATE\tEXIT\tSTARTED\tRUNS ON\tCOMMAND")
			for _, t := range ts {
				exit := ""
				if t.State.Final() {
					exit = fmt.Sprint(t.ExitCode)
				}
				where := "here"
				if t.Runner != "" {
					where = "runner " + t.Runner
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Owner, t.State, exit,
					t.StartedAt.Local().Format("15:04:05"), where, oneLine(t.Command, 60))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&g.json, "json", false, "print JSON")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

func taskCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "task", Short: "Run, show and kill background tasks"}
	c.PersistentFlags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	var cwd, owner, maxOutput string
	var timeout time.Duration
	run := &cobra.Command{
		Use:   "run \"COMMAND\"",
		Short: "Run a shell command in the background (its end goes to --owner's inbox, or to you)",
		Long: "Run one shell command in the background with /bin/sh -c, in the project's folder or in --cwd,\n" +
			"a folder relative to the project's folder. Quote the command as one argument: the shell you\n" +
			"type it in must not run its && or | itself.",
		Example: `  troupe task run "make test && echo ok"
  troupe task run "go test ./..." --cwd backend --owner lead --timeout 10m`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("task run takes the command as one quoted argument, like: troupe task run \"make test && echo ok\"")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var maxBytes int64
			if maxOutput != "" {
				n, err := task.ParseSize(maxOutput)
				if err != nil {
					return fmt.Errorf("--max-output: %w", err)
				}
				if n == 0 {
					return fmt.Errorf("--max-output: 0 keeps nothing: give a size like 1MB, or leave it out for the daemon's default")
				}
				maxBytes = n
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			t, err := cl.RunTask(cmd.Context(), p.ID, api.RunTaskRequest{Command: args[0], Cwd: cwd,
				TimeoutSeconds: timeout.Seconds(), Owner: troupe.AgentID(owner), MaxOutputBytes: maxBytes})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(t)
			}
			fmt.Fprintf(g.out, "started task %s\n", t.ID)
			return nil
		},
	}
	run.Flags().StringVar(&cwd, "cwd", "", "working directory, relative to the project's folder (default: the project's folder)")
	run.Flags().DurationVar(&timeout, "timeout", 0, "kill the command after this long (0: no limit)")
	run.Flags().StringVar(&maxOutput, "max-output", "", "output kept, like 64MB: its first half and its last half, the middle cut (default: the daemon's --task-max-output)")
	run.Flags().StringVar(&owner, "owner", "", "the agent whose inbox gets the completion (it wakes); default: you")
	run.Flags().BoolVar(&g.json, "json", false, "print the task as JSON")
	var tail int
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task and the end of its output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			t, err := cl.Task(cmd.Context(), p.ID, task.ID(args[0]))
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(t)
			}
			out, err := cl.TaskOutput(cmd.Context(), p.ID, t.ID, tail)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "task %s (%s) owner %s\ncommand: %s\n", t.ID, t.State, t.Owner, t.Command)
			if t.Runner != "" {
				fmt.Fprintf(g.out, "runs on runner %s (its cwd relative to the owner's worktree there)\n", t.Runner)
			}
			if t.State.Final() {
				fmt.Fprintf(g.out, "exit code %d after %v", t.ExitCode, t.EndedAt.Sub(t.StartedAt).Round(time.Millisecond))
				if t.Reason != "" {
					fmt.Fprintf(g.out, ": %s", t.Reason)
				}
				fmt.Fprintln(g.out)
			}
			if s := t.Stopped.Statement(); s != "" {
				fmt.Fprintf(g.out, "its supervisor %s\n", s)
			}
			if t.Output != nil {
				if s := t.Output.Statement(); s != "" {
					fmt.Fprintf(g.out, "output cut: %s\n", s)
				}
			}
			fmt.Fprintf(g.out, "--- output (last %d bytes at most) ---\n%s", tail, out)
			return nil
		},
	}
	show.Flags().IntVar(&tail, "tail", 4000, "bytes of output to show from the end")
	show.Flags().BoolVar(&g.json, "json", false, "print the task as JSON")
	kill := &cobra.Command{
		Use:   "kill ID",
		Short: "Stop a running task (SIGTERM, then SIGKILL)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			if err := cl.KillTask(cmd.Context(), p.ID, task.ID(args[0])); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(map[string]any{"project": p.ID, "task": args[0], "done": "stopping"})
			}
			fmt.Fprintf(g.out, "stopping task %s\n", args[0])
			return nil
		},
	}
	kill.Flags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.AddCommand(run, show, kill)
	return c
}

// mcpBridgeCmd relays a stdio MCP client to the daemon's /mcp endpoint,
// with the session token troupe gave the agent.
func mcpBridgeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp-bridge",
		Short: "Relay an MCP client speaking stdio to the daemon (token in TROUPE_MCP_TOKEN)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, tok := os.Getenv("TROUPE_MCP_URL"), os.Getenv("TROUPE_MCP_TOKEN")
			if tok == "" {
				return fmt.Errorf("TROUPE_MCP_TOKEN is empty: troupe sets it when it starts an agent; the bridge acts as that agent")
			}
			if url == "" {
				cl, err := g.client()
				if err != nil {
					return err
				}
				url = cl.Base() + "/mcp"
			}
			return mcp.Bridge(cmd.Context(), url, tok, os.Stdin, g.stdout)
		},
	}
}
