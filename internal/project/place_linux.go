package project

import "syscall"

// pseudoMagic are the statfs types of the kernel's pseudo-file systems
// (linux/magic.h).
var pseudoMagic = map[int64]string{
	0x9fa0:     "proc",
	0x62656572: "sysfs",
	0x1cd1:     "devpts",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0x64626720: "debugfs",
	0x74726163: "tracefs",
	0x73636673: "securityfs",
	0xcafe4a11: "bpf",
	0x6165676c: "pstore",
	0xde5e81e4: "efivarfs",
	0xf97cff8c: "selinuxfs",
	0x62656570: "configfs",
}

// pseudoFS returns the name of the pseudo-file system holding path, or ""
// when it is an ordinary one (or cannot be told).
func pseudoFS(path string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) != nil {
		return ""
	}
	return pseudoMagic[int64(st.Type)]
}
