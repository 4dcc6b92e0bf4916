package claudefmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// RegistryFile is one <config>/sessions/<pid>.json as the CLI writes it
// (docs/engines/claude-code.md, "Session registry"). Status, WaitingFor
// and UpdatedAt are absent before 2.1.3xx; PIDDomain too.
type RegistryFile struct {
	PID        int    `json:"pid"`
	SessionID  string `json:"sessionId"`
	Cwd        string `json:"cwd"`
	StartedAt  int64  `json:"startedAt"` // unix ms
	ProcStart  string `json:"procStart"` // field 22 of /proc/<pid>/stat
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Entrypoint string `json:"entrypoint"`
	PIDDomain  string `json:"pidDomain"`
	Name       string `json:"name"`
	Status     string `json:"status"` // idle, busy, waiting
	WaitingFor string `json:"waitingFor"`
	UpdatedAt  int64  `json:"updatedAt"` // unix ms
}

// MaxRegistryFile bounds a registry file's read (they are ~600 bytes).
const MaxRegistryFile = 64 << 10

// ParseRegistryFile decodes a registry file. A pid that is not positive
// or a missing session id is an error: such a file names nothing.
func ParseRegistryFile(b []byte) (RegistryFile, error) {
	var r RegistryFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		return RegistryFile{}, fmt.Errorf("decode registry file: %w", err)
	}
	if r.PID <= 0 {
		return RegistryFile{}, errors.New("decode registry file: no positive pid")
	}
	if r.SessionID == "" {
		return RegistryFile{}, errors.New("decode registry file: no sessionId")
	}
	return r, nil
}

// ReadRegistryFile reads the registry file at path: a regular file (not a
// link, a FIFO or a device: opened without blocking), at most
// MaxRegistryFile bytes, parsed by ParseRegistryFile. A file read while
// the CLI writes it may be cut: callers that need it try again.
func ReadRegistryFile(path string) (RegistryFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return RegistryFile{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return RegistryFile{}, err
	}
	if !fi.Mode().IsRegular() {
		return RegistryFile{}, fmt.Errorf("read registry file %s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxRegistryFile+1))
	if err != nil {
		return RegistryFile{}, err
	}
	if len(b) > MaxRegistryFile {
		return RegistryFile{}, fmt.Errorf("read registry file %s: over %d bytes", path, MaxRegistryFile)
	}
	return ParseRegistryFile(b)
}
