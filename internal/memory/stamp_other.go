//go:build !unix

package memory

import "io/fs"

// inode is 0 where file ids are not at hand: the stamp then rests on names,
// sizes and modification times, and on the Store's own writes.
func inode(fs.FileInfo) uint64 { return 0 }
