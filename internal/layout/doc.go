// Package layout holds no code: its test keeps the import rules written in
// ARCHITECTURE.md (who may import whom, which package alone may import each
// outside library) and checks that every package has a package doc.
package layout
