// Package layout holds no code: its test keeps the import rules written in
// ARCHITECTURE.md (who may import whom, which package alone may import each
// outside library), holds that file's package table to the code (one row
// per package, its imports column exact), and checks that every package
// has a package doc; and the citations of contracts: every C<N> a Go file
// cites is defined in docs/CONTRACTS.md, the tests listed there exist, and
// nothing cites a document outside the repository.
package layout
