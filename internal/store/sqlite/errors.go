package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
)

// Errors Open refuses a file with. Callers branch with errors.Is; the typed
// errors below carry the details.
var (
	// ErrCorrupt: the file is not a troupe database or is damaged.
	ErrCorrupt = errors.New("not a troupe database or corrupt")
	// ErrTooNew: the database was written by a newer troupe.
	ErrTooNew = errors.New("database schema too new")
	// ErrGone: the database file was deleted or replaced under an open
	// store.
	ErrGone = errors.New("database file gone")
)

// DamagedError reports a troupe database in which PRAGMA quick_check (or
// integrity_check) finds damage. It matches ErrCorrupt.
type DamagedError struct {
	Path    string // absolute
	Check   string // "quick_check" or "integrity_check"
	Problem string // the check's first finding
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the database is damaged (%s: %s): keep a copy of it (cp %s %s.bad), "+
		"then run troupe doctor --repair --state-dir %s to export what is readable into a fresh database",
		e.Check, e.Problem, e.Path, e.Path, filepath.Dir(e.Path))
}

// Is makes every DamagedError match ErrCorrupt.
func (e *DamagedError) Is(target error) bool { return target == ErrCorrupt }

// GoneError reports that the file of an open store was deleted or
// replaced. It matches ErrGone.
type GoneError struct {
	Path   string // absolute
	Reason string
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("database %s is gone (%s): troupe stops rather than write into a file nobody will open again; "+
		"restart the daemon: it opens what is at that path then, or a fresh, empty database", e.Path, e.Reason)
}

// Is makes every GoneError match ErrGone.
func (e *GoneError) Is(target error) bool { return target == ErrGone }

// CorruptError reports a file that is not a troupe database or is damaged.
// It matches ErrCorrupt.
type CorruptError struct {
	Path   string
	Reason string // what was wrong, for the person reading the message
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s is not a troupe database or is corrupt (%s): move it aside or use another --state-dir",
		e.Path, e.Reason)
}

// Is makes every CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// TooNewError reports a database whose schema version is newer than this
// binary supports. It matches ErrTooNew.
type TooNewError struct {
	Path      string
	Version   int64 // the file's schema version
	Supported int64 // the newest version this binary knows
}

func (e *TooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this troupe supports (%d): upgrade troupe or use another --state-dir",
		e.Version, e.Supported)
}

// Is makes every TooNewError match ErrTooNew.
func (e *TooNewError) Is(target error) bool { return target == ErrTooNew }

// applicationID marks a file as troupe's (PRAGMA application_id, header
// offset 68): "TRUP".
const applicationID = 0x54525550

// classify decides, from the application id, the schema version and the
// number of schema objects (0 when unknown), whether path is a troupe
// database this binary may open.
func classify(path string, appID, version, objects int64) error {
	latest := int64(latestVersion())
	switch {
	case appID != 0 && appID != applicationID:
		return &CorruptError{Path: path, Reason: fmt.Sprintf("application id 0x%08x belongs to another program", uint32(appID))}
	case appID == 0 && version != 0:
		return &CorruptError{Path: path, Reason: fmt.Sprintf("schema version %d without troupe's application id", version)}
	case appID == 0 && objects > 0:
		return &CorruptError{Path: path, Reason: fmt.Sprintf("SQLite database with %d schema objects but no troupe application id", objects)}
	case version < 0:
		return &CorruptError{Path: path, Reason: fmt.Sprintf("negative schema version %d", version)}
	case version > latest:
		return &TooNewError{Path: path, Version: version, Supported: latest}
	}
	return nil
}

// The SQLite file header, https://www.sqlite.org/fileformat.html#the_database_header.
const headerSize = 100

const headerMagic = "SQLite format 3\x00"

type header struct {
	userVersion   int64
	applicationID int64
}

// parseHeader checks the fixed fields of a SQLite header. It returns a
// non-empty reason when h is not a usable SQLite header.
func parseHeader(h []byte) (header, string) {
	if len(h) < headerSize {
		return header{}, fmt.Sprintf("file is %d bytes, shorter than a SQLite header", len(h))
	}
	if string(h[:16]) != headerMagic {
		return header{}, "no SQLite header"
	}
	pageSize := int(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return header{}, fmt.Sprintf("damaged header: page size %d", pageSize)
	}
	if w, r := h[18], h[19]; w < 1 || w > 2 || r < 1 || r > 2 {
		return header{}, fmt.Sprintf("damaged header: file format versions %d/%d", w, r)
	}
	if h[21] != 64 || h[22] != 32 || h[23] != 32 {
		return header{}, "damaged header: payload fractions"
	}
	if f := binary.BigEndian.Uint32(h[44:48]); f > 4 {
		return header{}, fmt.Sprintf("damaged header: schema format %d", f)
	}
	if e := binary.BigEndian.Uint32(h[56:60]); e > 3 {
		return header{}, fmt.Sprintf("damaged header: text encoding %d", e)
	}
	return header{
		userVersion:   int64(int32(binary.BigEndian.Uint32(h[60:64]))),
		applicationID: int64(int32(binary.BigEndian.Uint32(h[68:72]))),
	}, ""
}
