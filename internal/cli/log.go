package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/journal"
	"github.com/troupe-dev/troupe/internal/troupe"
)

func logCmd(g *globals) *cobra.Command {
	var turn string
	var limit int
	c := &cobra.Command{
		Use:   "log AGENT",
		Short: "Show what an agent did, turn by turn (oldest of the shown turns first)",
		Long: "Show an agent's recent turns: what each was given, its text, thinking (first line), tool calls\n" +
			"and results, permission decisions, usage and cost, and its error. The daemon keeps the newest\n" +
			"200 turns per agent, texts cut at 64 KB each; --json prints the structured record.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			l, err := cl.AgentLog(cmd.Context(), p.ID, troupe.AgentID(args[0]), troupe.TurnID(turn), 0, limit)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(l)
			}
			renderLog(g.out, l, time.Local)
			return nil
		},
	}
	c.Flags().StringVar(&turn, "turn", "", "show this turn only")
	c.Flags().IntVar(&limit, "limit", 5, "how many of the newest turns to show (at most 200)")
	c.Flags().BoolVar(&g.json, "json", false, "print the turns as JSON (newest first)")
	c.Flags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	return c
}

// renderLog writes l's turns for a person, oldest first, times in loc.
func renderLog(w io.Writer, l api.AgentLog, loc *time.Location) {
	if len(l.Turns) == 0 {
		fmt.Fprintf(w, "%s has no turns kept yet\n", l.Agent)
		return
	}
	ts := slices.Clone(l.Turns)
	slices.Reverse(ts)
	for i, t := range ts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		renderTurn(w, t, loc)
	}
}

func renderTurn(w io.Writer, t journal.Turn, loc *time.Location) {
	head := fmt.Sprintf("turn %s  %s", t.ID, t.StartedAt.In(loc).Format("2006-01-02 15:04:05"))
	switch {
	case !t.Ended():
		head += "  (running, or its end was lost)"
	case t.Error != "":
		head += fmt.Sprintf("  failed after %s", fmtMS(t.DurationMS))
	default:
		head += "  " + fmtMS(t.DurationMS)
	}
	if u := t.Usage; u != nil {
		head += "  " + fmtUsage(u)
	}
	fmt.Fprintln(w, head)
	for _, m := range t.Messages {
		fmt.Fprintf(w, "  given: %s from %s: %s\n", m.Kind, m.From, oneLine(m.Text, 100))
	}
	for _, ev := range t.Events {
		renderEvent(w, ev)
	}
	if t.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", oneLine(t.Error, 200))
	}
	if t.Dropped > 0 {
		fmt.Fprintf(w, "  %s not kept (the journal fell behind, or the turn went over %d MB)\n", plural(t.Dropped, "event", "events"), journal.MaxTurnBytes>>20)
	}
}

func renderEvent(w io.Writer, ev journal.Event) {
	cut := ""
	if ev.Cut {
		cut = fmt.Sprintf(" [cut at 64 KB of %d bytes]", ev.Size)
	}
	switch ev.Kind {
	case journal.KindOutput:
		text := strings.TrimRight(ev.Text, "\n")
		fmt.Fprintf(w, "  | %s%s\n", strings.ReplaceAll(text, "\n", "\n  | "), cut)
	case journal.KindThinking:
		first, rest, _ := strings.Cut(strings.TrimSpace(ev.Text), "\n")
		if rest != "" {
			first += " …"
		}
		fmt.Fprintf(w, "  thinking: %s%s\n", oneLine(first, 100), cut)
	case journal.KindToolCall:
		if t := ev.Tool; t != nil {
			fmt.Fprintf(w, "  tool %s %s%s\n", t.Name, oneLine(t.Input, 100), cut)
		}
	case journal.KindToolResult:
		if t := ev.Tool; t != nil {
			mark := "->"
			if t.IsError {
				mark = "-> error:"
			}
			first, _, _ := strings.Cut(strings.TrimSpace(t.Output), "\n")
			fmt.Fprintf(w, "    %s %s%s%s\n", mark, oneLine(first, 100), moreLines(t.Output), cut)
		}
	case journal.KindPermission:
		if p := ev.Permission; p != nil {
			verdict := "allowed"
			if !p.Allow {
				verdict = "denied"
				if p.Reason != "" {
					verdict += ": " + oneLine(p.Reason, 100)
				}
			}
			fmt.Fprintf(w, "  permission %s %s: %s\n", p.Tool, oneLine(p.Input, 60), verdict)
		}
	case journal.KindUsage: // the turn's last usage is in its heading
	case journal.KindSession:
		fmt.Fprintf(w, "  session %s\n", ev.SessionID)
	case journal.KindNotice:
		fmt.Fprintf(w, "  note: %s%s\n", oneLine(ev.Text, 200), cut)
	case journal.KindCheckpoint:
		fmt.Fprintf(w, "  %s%s\n", oneLine(ev.Text, 200), cut)
	default:
		fmt.Fprintf(w, "  %s\n", ev.Kind)
	}
}

// moreLines says how many lines a one-line summary of s leaves out.
func moreLines(s string) string {
	if n := strings.Count(strings.TrimRight(s, "\n"), "\n"); n > 0 {
		return " (+" + plural(n, "line", "lines") + ")"
	}
	return ""
}

func fmtMS(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

func fmtUsage(u *journal.Usage) string {
	s := fmt.Sprintf("%d in / %d out tokens", u.InputTokens, u.OutputTokens)
	if u.CacheReadTokens > 0 || u.CacheWriteTokens > 0 {
		s += fmt.Sprintf(" (cache %d read, %d written)", u.CacheReadTokens, u.CacheWriteTokens)
	}
	if u.CostUSD > 0 {
		s += fmt.Sprintf("  $%.4f", u.CostUSD)
	}
	return s
}
