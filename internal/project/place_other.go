//go:build !linux

package project

// pseudoFS tells pseudo-file systems apart on Linux only; elsewhere the
// paths in pseudoRoots are refused.
func pseudoFS(string) string { return "" }
