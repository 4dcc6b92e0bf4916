//go:build unix

package memory

import (
	"io/fs"
	"syscall"
)

// inode returns the file's inode number: an atomic write gives a note a new
// one even when its size and modification time stay the same.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
