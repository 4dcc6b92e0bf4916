package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/troupe-dev/troupe/internal/sandbox"
	"github.com/troupe-dev/troupe/internal/tool"
)

// The workspace tools: files and commands in the agent's working folder,
// every path through an os.Root of that folder (nothing leads outside:
// "..", an absolute path elsewhere, a symbolic link out are tool errors,
// never a read), regular files only (a FIFO, a socket or a device is a tool
// error, opened without blocking), everything bounded.
const (
	toolReadFile   = "read_file"
	toolWriteFile  = "write_file"
	toolEditFile   = "edit_file"
	toolListDir    = "list_dir"
	toolSearchText = "search_text"
	toolRunCommand = "run_command"
)

// workspaceToolNames are the workspace tools, in the order offered.
var workspaceToolNames = []string{toolReadFile, toolWriteFile, toolEditFile, toolListDir, toolSearchText, toolRunCommand}

// Bounds of the workspace tools.
const (
	maxFileRead     = 8 << 20  // a file read_file or edit_file reads
	maxToolOutput   = 64 << 10 // any tool's result given to the model
	maxWrite        = 8 << 20  // content write_file writes, a file edit_file makes
	maxListEntries  = 1000     // list_dir
	maxSearchHits   = 200      // search_text, by default and at most
	maxPath         = 4096     // bytes of a path (PATH_MAX): write_file made 100,000 nested folders that os.RemoveAll then failed on
	maxSearchFiles  = 20000    // files search_text looks at
	maxSearchDirs   = 20000    // folders search_text opens
	maxSearchDepth  = 64       // folders below its start search_text goes down
	maxSearchFile   = 1 << 20  // a file search_text reads
	maxSearchLine   = 300      // of a matching line shown
	maxSearchTotal  = 64 << 20 // bytes search_text reads in all
	defaultCmdLimit = 120      // seconds run_command lets a command run
	maxCmdLimit     = 1800     // seconds at most
)

// workspaceSpecs describe the workspace tools to the model.
var workspaceSpecs = map[string]tool.Spec{
	toolReadFile: {Name: toolReadFile,
		Description: "Read a text file of your working folder (a binary file is refused). Optional start_line and end_line (1-based, inclusive) read a range. At most 64 KB is returned; the cut is stated.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"path relative to your working folder"},"start_line":{"type":"integer","minimum":1},"end_line":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}`)},
	toolWriteFile: {Name: toolWriteFile,
		Description: "Write a file of your working folder (created with its folders if missing, replaced if present). Git's own files (.git) are not written.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`)},
	toolEditFile: {Name: toolEditFile,
		Description: "Edit a file of your working folder: replace old_string, which must occur exactly once in the file, by new_string. Include enough surrounding text to make old_string unique.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}},"required":["path","old_string","new_string"],"additionalProperties":false}`)},
	toolListDir: {Name: toolListDir,
		Description: "List a folder of your working folder (default: the working folder itself): names, folders end with /.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)},
	toolSearchText: {Name: toolSearchText,
		Description: "Search the text files under a folder of your working folder (default: all of it; .git is skipped) for a regular expression (RE2 syntax). Returns path:line: text, at most max_results (default and limit 200).",
		Schema:      json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":200}},"required":["pattern"],"additionalProperties":false}`)},
	toolRunCommand: {Name: toolRunCommand,
		Description: "Run a shell command (/bin/sh -c) in your working folder. It is stopped after timeout_seconds (default 120, at most 1800). Returns its exit status and output (stdout and stderr, at most 64 KB: the head and the tail, the cut stated).",
		Schema:      json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout_seconds":{"type":"integer","minimum":1,"maximum":1800}},"required":["command"],"additionalProperties":false}`)},
}

// workspace is the agent's working folder.
type workspace struct {
	root *os.Root
	dir  string // its real path
	// policy is the agent's sandbox: the file tools, which run in
	// troupe's own process, honour its read-only and hidden paths too.
	policy sandbox.Policy
}

// allowed checks rel (resolved, relative to the folder) against the
// sandbox: hidden paths are neither read nor written, read-only ones not
// written.
func (w *workspace) allowed(rel, shown string, write bool) error {
	r, wr := w.policy.Access(filepath.Join(w.dir, filepath.FromSlash(rel)))
	switch {
	case !r:
		return fmt.Errorf("%s is hidden by your sandbox: it is out of your reach", shown)
	case write && !wr:
		return fmt.Errorf("%s is read-only in your sandbox (troupe's and the tools' configuration): it is not changed", shown)
	}
	return nil
}

// openWorkspace opens dir as an os.Root.
func openWorkspace(dir string) (*workspace, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("open working folder: %w", err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open working folder: %w", err)
	}
	return &workspace{root: root, dir: real}, nil
}

func (w *workspace) close() error { return w.root.Close() }

// rel turns a path the model gave into one relative to the root: an
// absolute path must lie inside the folder; ".." may not lead out. The
// root checks again (and follows symbolic links only inside).
func (w *workspace) rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("the path holds a NUL byte")
	}
	if len(p) > maxPath {
		return "", fmt.Errorf("the path is %d bytes, more than %d: use a shorter one", len(p), maxPath)
	}
	if p == "" {
		p = "."
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(w.dir, filepath.Clean(p))
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "", fmt.Errorf("%s is outside your working folder %s: use a path inside it", p, w.dir)
		}
		p = r
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%s leads outside your working folder: use a path inside it", p)
	}
	return c, nil
}

// pathErr words an error of the root for the model.
func pathErr(p string, err error) error {
	var pe *os.PathError
	msg := err.Error()
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	switch {
	case strings.Contains(msg, "escapes from parent"), strings.Contains(msg, "path escapes"):
		return fmt.Errorf("%s leads outside your working folder (through .. or a symbolic link): use a path inside it", p)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", p)
	case errors.Is(err, syscall.ENXIO):
		return fmt.Errorf("%s is not a regular file (a FIFO or socket with nobody at the other end)", p)
	}
	return fmt.Errorf("%s: %s", p, msg)
}

// openRegular opens p for reading without blocking (a FIFO never waits)
// and checks it is a regular file of at most limit bytes.
func (w *workspace) openRegular(p string, limit int64) (*os.File, os.FileInfo, error) {
	rel, err := w.rel(p)
	if err != nil {
		return nil, nil, err
	}
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, pathErr(p, err)
	}
	// The file it is, links followed, against the sandbox's hidden paths.
	if real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil {
		if r, _ := w.policy.Access(real); !r {
			f.Close()
			return nil, nil, fmt.Errorf("%s is hidden by your sandbox: it is out of your reach", p)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, pathErr(p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		what := "not a regular file"
		if fi.IsDir() {
			what = "a folder: use list_dir"
		}
		return nil, nil, fmt.Errorf("%s is %s", p, what)
	}
	if limit > 0 && fi.Size() > limit {
		f.Close()
		return nil, nil, fmt.Errorf("%s is %d bytes, more than the %d this tool reads", p, fi.Size(), limit)
	}
	return f, fi, nil
}

// readAll reads a regular file of at most limit bytes.
func (w *workspace) readAll(p string, limit int64) ([]byte, os.FileInfo, error) {
	f, fi, err := w.openRegular(p, limit)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, pathErr(p, err)
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("%s grew past %d bytes while read", p, limit)
	}
	return b, fi, nil
}

type readArgs struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
}

func (w *workspace) readFile(args json.RawMessage) (string, error) {
	var a readArgs
	if err := tool.DecodeArgs(args, &a, "path"); err != nil {
		return "", err
	}
	if a.StartLine < 0 || a.EndLine < 0 || (a.EndLine > 0 && a.StartLine > a.EndLine) {
		return "", fmt.Errorf("bad line range %d-%d: lines count from 1 and start_line ≤ end_line", a.StartLine, a.EndLine)
	}
	b, _, err := w.readAll(a.Path, maxFileRead)
	if err != nil {
		return "", err
	}
	if binary(b) {
		return "", fmt.Errorf("%s is not a text file (a NUL byte in its first %d KB): read_file reads text; look at it with run_command (file, od -c | head) if you must", a.Path, binarySniff>>10)
	}
	if a.StartLine == 0 && a.EndLine == 0 {
		return capOutput(string(b), "ask for a range with start_line and end_line"), nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	start, end := max(a.StartLine, 1), a.EndLine
	if end == 0 || end > len(lines) {
		end = len(lines)
	}
	if start > len(lines) {
		return "", fmt.Errorf("%s has %d lines: start_line %d is past its end", a.Path, len(lines), start)
	}
	out := strings.Join(lines[start-1:end], "")
	return capOutput(out, "ask for a smaller range") + fmt.Sprintf("\n[lines %d-%d of %d]", start, end, len(lines)), nil
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (w *workspace) writeFile(args json.RawMessage) (string, error) {
	var a writeArgs
	if err := tool.DecodeArgs(args, &a, "path"); err != nil {
		return "", err
	}
	if len(a.Content) > maxWrite {
		return "", fmt.Errorf("content of %d bytes: at most %d in one write", len(a.Content), maxWrite)
	}
	rel, err := w.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return "", pathErr(a.Path, err)
		}
	}
	if err := w.write(rel, a.Path, []byte(a.Content), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s (%d bytes)", a.Path, len(a.Content)), nil
}

// write replaces the content of a regular file (made if missing) without
// blocking on anything else.
func (w *workspace) write(rel, shown string, b []byte, perm os.FileMode) error {
	if err := notGit(rel, shown); err != nil {
		return err
	}
	if err := w.allowed(rel, shown, true); err != nil {
		return err
	}
	if dir := path.Dir(rel); dir != "." { // a folder that is a link into .git
		d, err := w.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			return pathErr(shown, err)
		}
		err = w.notGitReal(d, shown)
		d.Close()
		if err != nil {
			return err
		}
	}
	if fi, err := w.root.Lstat(rel); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s is not a regular file: not written", shown)
	}
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, perm)
	if err != nil {
		return pathErr(shown, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return pathErr(shown, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: not written", shown)
	}
	if err := w.notGitReal(f, shown); err != nil { // a link into .git
		return err
	}
	if err := f.Truncate(0); err != nil {
		return pathErr(shown, err)
	}
	if _, err := f.Write(b); err != nil {
		return pathErr(shown, err)
	}
	if err := f.Close(); err != nil {
		return pathErr(shown, err)
	}
	return nil
}

// git's own files (the .git folder, or the .git file of a worktree) are
// not written by the workspace tools: git runs what its config and hooks
// name (core.fsmonitor, core.hooksPath, post-merge…) when troupe or the
// person runs git in this folder, so a write there would let an agent
// without run_command run commands. A path through .git is refused as
// written; a symbolic link (or a folder link) that leads into it is
// refused once opened, from the opened file's real path
// (/proc/self/fd; where that cannot be read, the written path alone is
// checked).
func notGit(rel, shown string) error {
	for c := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(c, ".git") {
			return fmt.Errorf("%s is inside git's own files (.git): the workspace tools do not change them (git runs what its config and hooks name); change the project's files instead", shown)
		}
	}
	return nil
}

// maxLinks is how many symbolic links resolve follows in one path.
const maxLinks = 40

// resolve is rel with every symbolic link of the path's existing part
// followed (inside the root: a link out is an error), so a write names,
// is asked about and is checked against .git as the file it changes, and
// nothing is created before the whole path is known to be allowed. The
// result is relative to the working folder, "/"-separated ("." for it).
func (w *workspace) resolve(p string) (string, error) {
	rel, err := w.rel(p)
	if err != nil {
		return "", err
	}
	var done []string
	rest := strings.Split(rel, "/")
	missing, links := false, 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", fmt.Errorf("%s leads outside your working folder (through .. or a symbolic link): use a path inside it", p)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		if missing {
			done = append(done, c)
			continue
		}
		fi, err := w.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			missing = true
			done = append(done, c)
			continue
		} else if err != nil {
			return "", pathErr(p, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s goes through more than %d symbolic links: use the real path", p, maxLinks)
		}
		to, err := w.root.Readlink(cur)
		if err != nil {
			return "", pathErr(p, err)
		}
		if filepath.IsAbs(to) {
			r, err := filepath.Rel(w.dir, filepath.Clean(to))
			if err != nil || r == ".." || strings.HasPrefix(r, "../") {
				return "", fmt.Errorf("%s leads outside your working folder (through a symbolic link to %s): use a path inside it", p, to)
			}
			done, to = nil, r
		}
		rest = append(strings.Split(filepath.ToSlash(to), "/"), rest...)
	}
	out := "."
	if len(done) > 0 {
		out = path.Join(done...)
	}
	if err := notGit(out, p); err != nil {
		if out != rel {
			return "", fmt.Errorf("%s is %s: %w", p, out, err)
		}
		return "", err
	}
	return out, nil
}

// notGitReal applies notGit to the real path of an opened file or folder.
func (w *workspace) notGitReal(f *os.File, shown string) error {
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return nil // no /proc: the written path was checked
	}
	r, err := filepath.Rel(w.dir, real)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return fmt.Errorf("%s leads outside your working folder: not written", shown)
	}
	return notGit(filepath.ToSlash(r), shown)
}

type editArgs struct {
	Path      string `json:"path"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

func (w *workspace) editFile(args json.RawMessage) (string, error) {
	var a editArgs
	if err := tool.DecodeArgs(args, &a, "path", "old_string"); err != nil {
		return "", err
	}
	rel, err := w.resolve(a.Path)
	if err != nil {
		return "", err
	}
	b, fi, err := w.readAll(rel, maxFileRead)
	if err != nil {
		return "", err
	}
	switch n := strings.Count(string(b), a.OldString); n {
	case 1:
	case 0:
		return "", fmt.Errorf("old_string is not in %s: read the file and copy the text exactly, spaces and tabs included", a.Path)
	default:
		return "", fmt.Errorf("old_string occurs %d times in %s: include more of the surrounding text so it occurs once", n, a.Path)
	}
	out := strings.Replace(string(b), a.OldString, a.NewString, 1)
	if len(out) > maxWrite {
		return "", fmt.Errorf("the edit would make %s %d bytes, more than %d", a.Path, len(out), maxWrite)
	}
	if err := w.write(rel, a.Path, []byte(out), fi.Mode().Perm()); err != nil {
		return "", err
	}
	return fmt.Sprintf("edited %s: replaced %d bytes by %d", a.Path, len(a.OldString), len(a.NewString)), nil
}

type listArgs struct {
	Path string `json:"path"`
}

func (w *workspace) listDir(args json.RawMessage) (string, error) {
	var a listArgs
	if err := tool.DecodeArgs(args, &a); err != nil {
		return "", err
	}
	rel, err := w.rel(a.Path)
	if err != nil {
		return "", err
	}
	shown := a.Path
	if shown == "" {
		shown = "."
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		return "", pathErr(shown, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a folder", shown)
	}
	d, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		return "", pathErr(shown, err)
	}
	defer d.Close()
	ents, err := d.ReadDir(maxListEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", pathErr(shown, err)
	}
	more := len(ents) > maxListEntries
	if more {
		ents = ents[:maxListEntries]
	}
	slices.SortFunc(ents, func(x, y os.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	var b strings.Builder
	for _, e := range ents {
		b.WriteString(e.Name())
		switch t := e.Type(); {
		case t.IsDir():
			b.WriteString("/")
		case t&os.ModeSymlink != 0:
			b.WriteString(" (symbolic link)")
		case !t.IsRegular():
			b.WriteString(" (not a regular file)")
		}
		b.WriteString("\n")
	}
	if more {
		fmt.Fprintf(&b, "[cut: more than %d entries; only %d listed]\n", maxListEntries, maxListEntries)
	}
	if len(ents) == 0 {
		return shown + " is empty", nil
	}
	return capOutput(b.String(), "list a sub-folder"), nil
}

type searchArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	MaxResults int    `json:"max_results"`
}

func (w *workspace) searchText(ctx context.Context, args json.RawMessage) (string, error) {
	var a searchArgs
	if err := tool.DecodeArgs(args, &a, "pattern"); err != nil {
		return "", err
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return "", fmt.Errorf("pattern: %v (RE2 syntax; escape special characters with \\)", err)
	}
	limit := a.MaxResults
	if limit <= 0 || limit > maxSearchHits {
		limit = maxSearchHits
	}
	rel, err := w.rel(a.Path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	hits, files, dirs, total := 0, 0, 0, int64(0)
	var stop, deep string
	walkErr := fs.WalkDir(w.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil // an unreadable entry is skipped
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != rel {
				return fs.SkipDir
			}
			if dirs++; dirs > maxSearchDirs {
				stop = fmt.Sprintf("[cut: stopped after %d folders: search a sub-folder]", maxSearchDirs)
				return fs.SkipAll
			}
			depth := strings.Count(p, "/") + 1 // folders below rel
			if rel != "." {
				depth -= strings.Count(rel, "/") + 1
			}
			if depth > maxSearchDepth {
				deep = fmt.Sprintf("[folders more than %d levels down were not searched: search one of them]", maxSearchDepth)
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if files++; files > maxSearchFiles {
			stop = fmt.Sprintf("[cut: stopped after %d files: search a sub-folder]", maxSearchFiles)
			return fs.SkipAll
		}
		f, fi, err := w.openRegular(p, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		if fi.Size() > maxSearchFile {
			return nil
		}
		if total += fi.Size(); total > maxSearchTotal {
			stop = fmt.Sprintf("[cut: stopped after reading %d MB: search a sub-folder]", maxSearchTotal>>20)
			return fs.SkipAll
		}
		data, err := io.ReadAll(io.LimitReader(f, maxSearchFile))
		if err != nil || binary(data) {
			return nil // unreadable or binary
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), maxSearchFile)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if !re.MatchString(line) {
				continue
			}
			fmt.Fprintf(&b, "%s:%d: %s\n", p, n, clipText(line, maxSearchLine))
			if hits++; hits >= limit {
				stop = fmt.Sprintf("[cut: %d results shown, there may be more: narrow the pattern or the folder]", limit)
				return fs.SkipAll
			}
		}
		return nil
	})
	if walkErr != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", pathErr(a.Path, walkErr)
	}
	for _, note := range []string{stop, deep} {
		if note == "" {
			continue
		}
		if hits == 0 {
			b.WriteString("no match\n")
			hits = -1 // said once
		}
		b.WriteString(note + "\n")
	}
	if hits == 0 {
		return "no match", nil
	}
	return capOutput(b.String(), "narrow the search"), nil
}

// binarySniff is how much of a file is looked at for a NUL byte, the
// mark of a file that is not text (as git and grep judge).
const binarySniff = 8 << 10

func binary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), binarySniff)], 0) >= 0 }

// capOutput cuts a tool's result to maxToolOutput, stating the cut and
// what to do.
func capOutput(s, hint string) string {
	if len(s) <= maxToolOutput {
		return s
	}
	t, _ := cutText(s, maxToolOutput)
	return t + fmt.Sprintf("\n[cut: %d of %d bytes shown: %s]", len(t), len(s), hint)
}
