package cli

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/internal/api"
	"github.com/troupe-dev/troupe/internal/memory"
	"github.com/troupe-dev/troupe/internal/troupe"
)

// memoryCmd is `troupe memory`: the project's memory notes (the files of
// .troupe/memory that the agents read and write through their memory
// tools), seen and edited by the person.
func memoryCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "memory",
		Short: "List, search, show, edit and remove the project's memory notes (.troupe/memory)",
		Long: "The memory notes are what the project's agents share across sessions: one Markdown file per note\n" +
			"in .troupe/memory, with a name, a one-line description and a type. These commands go through the\n" +
			"daemon, which keeps the notes' search index.",
		Args: cobra.NoArgs,
	}
	c.PersistentFlags().BoolVar(&g.json, "json", false, "print the result as JSON")
	c.PersistentFlags().StringVar(&g.project, "project", "", "project path or id (default: the project containing the current directory)")
	c.AddCommand(memoryListCmd(g), memorySearchCmd(g), memoryShowCmd(g), memoryEditCmd(g), memoryRmCmd(g))
	return c
}

func memoryListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the notes, in name order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			l, err := cl.MemoryNotes(cmd.Context(), p.ID, "", 0)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(l)
			}
			printNotes(g.out, l.Notes, false)
			for _, e := range l.Problems {
				fmt.Fprintf(g.errw, "left out: %s\n", e)
			}
			return nil
		},
	}
}

func memorySearchCmd(g *globals) *cobra.Command {
	limit := 0
	c := &cobra.Command{
		Use:     "search WORDS...",
		Short:   "The notes matching the words, best first",
		Example: "  troupe memory search release steps",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("memory search takes the words to look for, like: troupe memory search release steps")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 || limit > memory.MaxSearchLimit {
				return fmt.Errorf("--limit: %d is out of range: give a number from 1 to %d", limit, memory.MaxSearchLimit)
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			l, err := cl.MemoryNotes(cmd.Context(), p.ID, strings.Join(args, " "), limit)
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(l)
			}
			if len(l.Notes) == 0 {
				fmt.Fprintln(g.out, "no note matches")
				return nil
			}
			printNotes(g.out, l.Notes, true)
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("at most this many notes (default %d)", memory.DefaultSearchLimit))
	return c
}

func memoryShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print a note as its file holds it",
		Args:  oneName("memory show", "troupe memory show release-steps"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			n, err := cl.MemoryNote(cmd.Context(), p.ID, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(n)
			}
			_, err = g.out.Write(memory.Format(fromWire(n)))
			return err
		},
	}
}

func memoryEditCmd(g *globals) *cobra.Command {
	var desc, typ, body, bodyFile string
	c := &cobra.Command{
		Use:   "edit NAME",
		Short: "Create or change a note: in your editor, or with --description, --type and --body",
		Long: "With no flag, opens the note (or a new one) in $VISUAL or $EDITOR (vi when neither is set) as its\n" +
			"file holds it, and saves what you leave there. With flags, changes only the fields they give.",
		Example: "  troupe memory edit release-steps\n" +
			"  troupe memory edit release-steps --description \"how a release goes out\" --body-file steps.md",
		Args: oneName("memory edit", "troupe memory edit release-steps"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if body != "" && bodyFile != "" {
				return errors.New("--body and --body-file exclude each other: give one")
			}
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			old, err := cl.MemoryNote(cmd.Context(), p.ID, args[0])
			exists := err == nil
			if err != nil && !errors.Is(err, troupe.ErrNotFound) {
				return err
			}
			if !exists {
				old = api.MemoryNote{Name: memory.Sanitize(args[0]), Type: memory.DefaultType}
			}
			n := fromWire(old)
			flags := cmd.Flags().Changed("description") || cmd.Flags().Changed("type") || body != "" || bodyFile != ""
			if flags {
				n.Description = cmp.Or(desc, n.Description)
				n.Type = cmp.Or(typ, n.Type)
				switch {
				case body != "":
					n.Body = body
				case bodyFile != "":
					b, err := readBodyFile(bodyFile, cmd.InOrStdin())
					if err != nil {
						return err
					}
					n.Body = b
				}
			} else {
				if n, err = editNote(cmd, n); err != nil {
					return err
				}
				if exists && bytes.Equal(memory.Format(n), memory.Format(fromWire(old))) {
					fmt.Fprintf(g.out, "note %s unchanged\n", n.Name)
					return nil
				}
			}
			saved, err := cl.WriteMemoryNote(cmd.Context(), p.ID, n.Name, api.WriteNoteRequest{Description: n.Description, Type: n.Type, Body: n.Body})
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(saved)
			}
			verb := "saved"
			if !exists {
				verb = "created"
			}
			fmt.Fprintf(g.out, "note %s %s\n", saved.Name, verb)
			return nil
		},
	}
	c.Flags().StringVar(&desc, "description", "", "the note's one-line description")
	c.Flags().StringVar(&typ, "type", "", "the note's type ("+memory.DefaultType+" by default)")
	c.Flags().StringVar(&body, "body", "", "the note's text")
	c.Flags().StringVar(&bodyFile, "body-file", "", "read the note's text from this file (- for standard input)")
	return c
}

func memoryRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a note",
		Args:  oneName("memory rm", "troupe memory rm release-steps"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, p, err := g.projectClient(cmd.Context())
			if err != nil {
				return err
			}
			n, err := cl.RemoveMemoryNote(cmd.Context(), p.ID, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(n)
			}
			fmt.Fprintf(g.out, "note %s removed\n", n.Name)
			return nil
		},
	}
}

// maxDescription is the width of the DESCRIPTION column of a list; a longer
// description is cut with "…".
const maxDescription = 60

// printNotes prints notes as a table; with snippets, the matched text of
// each under it.
func printNotes(w io.Writer, notes []api.MemoryNote, snippets bool) {
	if len(notes) == 0 && !snippets {
		fmt.Fprintln(w, "no notes yet (troupe memory edit NAME writes one)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tMODIFIED\tDESCRIPTION")
	for _, n := range notes {
		mod := "-"
		if !n.Modified.IsZero() {
			mod = n.Modified.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, n.Type, mod, oneLine(n.Description, maxDescription))
		if snippets && n.Snippet != "" {
			fmt.Fprintf(tw, "\t\t\t  %s\n", oneLine(n.Snippet, 2*maxDescription))
		}
	}
	tw.Flush()
}

// oneName checks that a memory command got the one note name it takes.
func oneName(cmd, example string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s takes the note's name, like: %s", cmd, example)
		}
		return nil
	}
}

func fromWire(n api.MemoryNote) memory.Note {
	out := memory.Note{Name: n.Name, Description: n.Description, Type: n.Type}
	if n.Body != nil {
		out.Body = *n.Body
	}
	return out
}

// maxBody bounds what --body-file reads: beyond a note's limit the daemon
// refuses it anyway, with the limit said.
const maxBody = memory.MaxNoteSize + 1

func readBodyFile(path string, stdin io.Reader) (string, error) {
	var r io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("--body-file: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBody))
	if err != nil {
		return "", fmt.Errorf("--body-file: %w", err)
	}
	return string(b), nil
}

// editNote opens n, as its file holds it, in the person's editor and reads
// it back. What the editor leaves must still be a note (front matter with
// its fields); an error names what is wrong and the temporary file, kept
// so that nothing typed is lost.
func editNote(cmd *cobra.Command, n memory.Note) (memory.Note, error) {
	dir, err := os.MkdirTemp("", "troupe-memory-")
	if err != nil {
		return memory.Note{}, fmt.Errorf("edit note: %w", err)
	}
	file := filepath.Join(dir, n.Name+".md")
	if n.Description == "" {
		n.Description = "one line: what this note is for"
	}
	if err := os.WriteFile(file, memory.Format(n), 0o600); err != nil {
		os.RemoveAll(dir)
		return memory.Note{}, fmt.Errorf("edit note: %w", err)
	}
	editor := cmp.Or(os.Getenv("VISUAL"), os.Getenv("EDITOR"), "vi")
	// The editor is a command line of the person's, as git runs it.
	ed := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$@"`, editor, file)
	ed.Stdin, ed.Stdout, ed.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := ed.Run(); err != nil {
		return memory.Note{}, fmt.Errorf("edit note: the editor %q failed: %w (your text is in %s)", editor, err, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return memory.Note{}, fmt.Errorf("edit note: %w", err)
	}
	got, err := memory.Parse(n.Name+".md", data)
	if err != nil {
		return memory.Note{}, fmt.Errorf("edit note: %w (your text is in %s: fix it and run troupe memory edit %s --body-file %s, or edit again)", err, file, n.Name, file)
	}
	os.RemoveAll(dir)
	return got, nil
}
