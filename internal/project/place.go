package project

import (
	"fmt"
	"path/filepath"

	"github.com/troupe-dev/troupe/internal/troupe"
)

// pseudoRoots are the folders of the kernel's pseudo-file systems: no
// project lives there.
var pseudoRoots = []string{"/proc", "/sys", "/dev"}

// checkPlace refuses a folder that cannot be a project: the file system's
// root, and the kernel's pseudo-file systems (by path, and where the system
// tells, by file system type). canon is a canonical path.
func checkPlace(canon string) error {
	if canon == filepath.Dir(canon) {
		return &troupe.FieldError{Field: "path", Msg: canon + " is the root of the file system, not a project: give the project's own folder, like ~/code/app"}
	}
	for _, p := range pseudoRoots {
		if within(canon, p) {
			return &troupe.FieldError{Field: "path", Msg: fmt.Sprintf("%s is in %s, a file system the kernel makes up, not a project: give the project's own folder, like ~/code/app", canon, p)}
		}
	}
	if fsType := pseudoFS(canon); fsType != "" {
		return &troupe.FieldError{Field: "path", Msg: fmt.Sprintf("%s is on a %s file system, which the kernel makes up, not a project: give the project's own folder, like ~/code/app", canon, fsType)}
	}
	return nil
}
