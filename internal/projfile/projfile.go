// Package projfile reads the files troupe takes from a project folder — the
// team file, prompt files, memory notes — as untrusted input (contract C14):
// anything that writes into the folder, an agent or one of its tasks, may
// have put a FIFO, a socket, a device, a directory, a symlink leading
// outside, or a huge file where troupe expects a small text file.
//
// A Kind says what a file is called in errors and how big it may be. Its
// Read opens the file through an os.Root (no symlink, "..", or absolute link
// leaves the folder), refuses what a stat shows is not a regular file before
// opening it, opens with O_NONBLOCK and O_NOCTTY (a FIFO swapped in after
// the stat opens at once instead of waiting for a writer), checks the opened
// file again with fstat, and reads at most the cap plus one byte. Every
// refusal is a *troupe.FieldError naming the file, what it is, and what to
// do. A missing file is an error matching fs.ErrNotExist.
//
// It holds no state and owns no goroutines; its functions are safe for
// concurrent use. Read never blocks on the file's kind; it may still wait on
// a slow file system, so callers must not hold a lock while calling it.
// Any package that reads project files may import it; it imports
// internal/troupe and the standard library only.
package projfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// Kind is a kind of project file: its name in errors, its size cap, and
// what to do about a file over the cap.
type Kind struct {
	Name   string // "team file"
	Max    int64  // bytes
	Shrink string // "make it smaller"
}

// The kinds of files troupe reads from a project.
var (
	Team   = Kind{Name: "team file", Max: 1 << 20, Shrink: "make it smaller"}
	Prompt = Kind{Name: "prompt file", Max: 256 << 10, Shrink: "shorten it, or move what the agent may look up into memory notes"}
	Note   = Kind{Name: "note", Max: 1 << 20, Shrink: "split it into several notes"}
)

// Read reads the file name (slash-separated, relative to root) in root. The
// errors name the file as root's name joined with name. It returns the
// file's contents and what fstat said of the opened file.
func (k Kind) Read(root *os.Root, name string) ([]byte, fs.FileInfo, error) {
	shown := filepath.Join(root.Name(), filepath.FromSlash(name))
	fi, err := root.Stat(name)
	if err != nil {
		return nil, nil, k.openError(root, name, shown, err)
	}
	if err := k.check(shown, fi); err != nil {
		return nil, nil, err
	}
	if afterStat != nil {
		afterStat(name)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, k.openError(root, name, shown, err)
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", shown, err)
	}
	if err := k.check(shown, fi); err != nil { // replaced since the stat
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, k.Max+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", shown, err)
	}
	if int64(len(data)) > k.Max {
		return nil, nil, k.tooBig(shown, max(fi.Size(), int64(len(data))))
	}
	return data, fi, nil
}

// afterStat, set by tests, runs between the stat and the open.
var afterStat func(name string)

// ReadIn reads the file at path in the folder dir: path is relative to dir,
// or absolute and inside it. A path leading outside dir is refused.
func (k Kind) ReadIn(dir, path string) ([]byte, fs.FileInfo, error) {
	rel, err := k.Rel(dir, path)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open project folder: %w", err)
	}
	defer root.Close()
	return k.Read(root, rel)
}

// Rel returns path relative to dir, slash-separated: path is relative to
// dir, or absolute and inside it. A path that leaves dir, lexically, is a
// *troupe.FieldError saying so (symlinks are Read's business).
func (k Kind) Rel(dir, path string) (string, error) {
	p := path
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return "", fmt.Errorf("locate %s: %w", path, err)
		}
		p = r
	}
	p = filepath.Clean(p)
	if p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator)) || filepath.IsAbs(p) {
		return "", &troupe.FieldError{File: path, Msg: fmt.Sprintf("the %s is outside the project folder %s: troupe reads only files inside the project; move it there and give its path relative to the project folder", k.Name, dir)}
	}
	return filepath.ToSlash(p), nil
}

// check refuses what is not a regular file within the cap.
func (k Kind) check(shown string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return &troupe.FieldError{File: shown, Msg: fmt.Sprintf("the %s is %s, not a regular file: troupe reads only regular files from a project; replace it with the file itself", k.Name, Describe(fi.Mode()))}
	}
	if fi.Size() > k.Max {
		return k.tooBig(shown, fi.Size())
	}
	return nil
}

func (k Kind) tooBig(shown string, size int64) error {
	s := Size(size)
	if s == Size(k.Max) {
		s = fmt.Sprintf("%d bytes", size)
	}
	return &troupe.FieldError{File: shown, Msg: fmt.Sprintf("the %s is %s, over the %s limit: %s", k.Name, s, Size(k.Max), k.Shrink)}
}

// openError explains why name could not be stat'ed or opened: a missing
// file matches fs.ErrNotExist; a symlink leading outside the folder, or a
// socket, is said so.
func (k Kind) openError(root *os.Root, name, shown string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: the %s does not exist: %w", shown, k.Name, fs.ErrNotExist)
	}
	if li, lerr := root.Lstat(name); lerr == nil {
		switch {
		case li.Mode()&fs.ModeSymlink != 0:
			target, _ := root.Readlink(name)
			return &troupe.FieldError{File: shown, Msg: fmt.Sprintf("the %s is a symbolic link to %s, which leads outside the project or through an absolute path: troupe follows only relative links that stay inside the project; replace the link with the file itself", k.Name, target)}
		case !li.Mode().IsRegular():
			return &troupe.FieldError{File: shown, Msg: fmt.Sprintf("the %s is %s, not a regular file: troupe reads only regular files from a project; replace it with the file itself", k.Name, Describe(li.Mode()))}
		}
	} else if !errors.Is(lerr, fs.ErrNotExist) && !errors.Is(lerr, syscall.ENOTDIR) {
		// A folder on the way is a link leading outside, or unreadable.
		return &troupe.FieldError{File: shown, Msg: fmt.Sprintf("cannot reach the %s (%v): a folder on its path may be a symbolic link leading outside the project; keep the file inside the project, reached through real folders", k.Name, unwrapPath(lerr))}
	}
	return fmt.Errorf("read %s: %w", shown, err)
}

func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Describe names a file mode's type, with its article: "a named pipe (FIFO)",
// "a socket", "a directory"... ("not a regular file" for any other).
func Describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// Size writes n bytes for people: "512 bytes", "256 KB", "3.2 MB".
func Size(n int64) string {
	const kb, mb = 1 << 10, 1 << 20
	trim := func(f float64, unit string) string {
		s := fmt.Sprintf("%.1f", f)
		return strings.TrimSuffix(s, ".0") + " " + unit
	}
	switch {
	case n >= mb:
		return trim(float64(n)/mb, "MB")
	case n >= kb:
		return trim(float64(n)/kb, "KB")
	}
	return fmt.Sprintf("%d bytes", n)
}
