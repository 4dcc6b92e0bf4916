package worktree

import (
	"io/fs"
	"syscall"
)

// blocks is the disk space fi takes, in bytes.
func blocks(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
