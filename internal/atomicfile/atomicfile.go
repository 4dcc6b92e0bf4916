// Package atomicfile is troupe's one atomic write: a reader of the file
// sees either what was there before or the whole new contents, also after
// a crash or a power cut. Every write does the same steps, with the same
// durability:
//
//  1. write the data to a new temporary file in the same folder
//     (".<name>.tmp-<random>", created exclusively, mode perm less the
//     umask, like os.WriteFile);
//  2. fsync the temporary file and close it;
//  3. rename it over the file (or, with NoReplace, hard-link it into place
//     only if no file has the name);
//  4. fsync the folder, so that the rename itself is on disk.
//
// A failure before step 3 leaves the old file whole and removes the
// temporary file. A failure at step 4 is reported, but the new file is in
// place by then: it is not undone.
//
// Concurrency: stateless; concurrent writers of one file each write a
// whole file and the last rename wins.
//
// Who may import: anything that writes a file that must never be seen half
// written (state dir files, task records, memory notes, kept messages). It
// depends on nothing of troupe.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
)

// Options change what WriteIn does; the zero value replaces the file.
type Options struct {
	// NoReplace leaves an existing file alone: the write fails with an
	// error matching fs.ErrExist. A hard link puts the file in place only
	// if nothing has its name; on a file system without hard links, a
	// check before the rename does.
	NoReplace bool
	// Step, for tests, runs at the named steps of the write ("written":
	// the data written, before the fsync; "rename": before the rename)
	// and fails the write with the error it returns.
	Step func(step string) error
}

// Write writes data to the file at path atomically (see the package doc),
// replacing what was there.
func Write(path string, data []byte, perm fs.FileMode) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return WriteIn(root, filepath.Base(path), data, perm, Options{})
}

// WriteIn writes data to the file name (slash-separated, inside root)
// atomically (see the package doc). Nothing is written outside root.
func WriteIn(root *os.Root, name string, data []byte, perm fs.FileMode, o Options) (err error) {
	if o.NoReplace {
		if _, err := root.Lstat(name); err == nil {
			return fs.ErrExist
		}
	}
	dir, base := path.Split(name)
	var (
		tmp string
		f   *os.File
	)
	for range 10 {
		tmp = fmt.Sprintf("%s.%s.tmp-%016x", dir, base, rand.Uint64())
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			if rerr := root.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("remove temporary file: %w", rerr))
			}
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = o.step("written"); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	err, f = f.Close(), nil
	if err != nil {
		return err
	}
	if err = o.step("rename"); err != nil {
		return err
	}
	if err = place(root, tmp, name, o.NoReplace); err != nil {
		return err
	}
	// The file is in place: a failure to sync the folder is reported, not
	// undone.
	return syncDir(root, dir)
}

// place puts tmp at name: a rename, or with noReplace a hard link, after
// which the temporary name goes.
func place(root *os.Root, tmp, name string, noReplace bool) error {
	if !noReplace {
		return root.Rename(tmp, name)
	}
	err := root.Link(tmp, name)
	if err == nil {
		// The file is in place under both names; should the temporary
		// one fail to go, a stray hidden file is all that is left.
		root.Remove(tmp)
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return err
	}
	// No hard links on this file system: WriteIn's Lstat checked.
	return root.Rename(tmp, name)
}

// syncDir fsyncs folder dir of root: the rename is durable once it is.
func syncDir(root *os.Root, dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

func (o Options) step(name string) error {
	if o.Step == nil {
		return nil
	}
	return o.Step(name)
}
