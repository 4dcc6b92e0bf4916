package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/troupe-dev/troupe/internal/clip"
)

// Bounds of the output a task keeps on disk (contract C14).
const (
	// DefaultMaxOutput is the output a task keeps when it is given no cap:
	// the first half and the last half of it.
	DefaultMaxOutput int64 = 64 << 20
	// MinMaxOutput and MaxMaxOutput bound the cap a task may be given.
	MinMaxOutput int64 = 64 << 10
	MaxMaxOutput int64 = 64 << 30
)

// The tail file (outputTailFile) of a task that wrote more than half its cap:
// a header, then a ring of ringCap bytes holding the end of the output.
//
//	[0:8)   tailMagic
//	[8:16)  ringCap, little-endian
//	[16:24) n: bytes written to the tail so far, little-endian
//	[24:)   the ring: byte k of the tail is at 24 + k%ringCap
//
// The header's n is written after the bytes it counts, so a reader never
// sees a count ahead of the data (it may see data ahead of the count).
const (
	tailMagic  = "trtail1\n"
	tailHeader = 24
)

// cappedLog is where a supervisor writes a job's output: output.log takes
// the first headMax bytes, output.tail a rolling window of the last
// ringCap; headMax + ringCap is the cap, so the two files never hold more
// than the cap plus the tail's 24-byte header. It is used by one goroutine.
type cappedLog struct {
	dir     string
	head    *os.File
	tail    *os.File // nil until the head is full
	headMax int64
	ringCap int64
	headN   int64 // bytes in output.log
	tailN   int64 // bytes written to the tail, kept or not
}

// openCappedLog creates dir/output.log for a job whose output is capped at
// max bytes.
func openCappedLog(dir string, max int64) (*cappedLog, error) {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	f, err := os.OpenFile(filepath.Join(dir, outputFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &cappedLog{dir: dir, head: f, headMax: max / 2, ringCap: max - max/2}, nil
}

// writeError names the file a write failed on: "write output.log: …".
type writeError struct {
	file string
	err  error
}

func (e *writeError) Error() string { return "write " + e.file + ": " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

func (l *cappedLog) Write(p []byte) (int, error) {
	n := len(p)
	if room := l.headMax - l.headN; room > 0 {
		k := int(min(room, int64(len(p))))
		w, err := l.head.Write(p[:k])
		l.headN += int64(w)
		if err != nil {
			return w, &writeError{outputFile, err}
		}
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if l.tail == nil {
		f, err := os.OpenFile(filepath.Join(l.dir, outputTailFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return n - len(p), &writeError{outputTailFile, err}
		}
		var h [tailHeader]byte
		copy(h[:], tailMagic)
		binary.LittleEndian.PutUint64(h[8:], uint64(l.ringCap))
		if _, err := f.WriteAt(h[:], 0); err != nil {
			f.Close()
			return n - len(p), &writeError{outputTailFile, err}
		}
		l.tail = f
	}
	// Only the last ringCap bytes of p can stay.
	if skip := int64(len(p)) - l.ringCap; skip > 0 {
		l.tailN += skip
		p = p[skip:]
	}
	for len(p) > 0 {
		off := l.tailN % l.ringCap
		k := int(min(l.ringCap-off, int64(len(p))))
		if _, err := l.tail.WriteAt(p[:k], tailHeader+off); err != nil {
			return n - len(p), &writeError{outputTailFile, err}
		}
		l.tailN += int64(k)
		p = p[k:]
	}
	var c [8]byte
	binary.LittleEndian.PutUint64(c[:], uint64(l.tailN))
	if _, err := l.tail.WriteAt(c[:], 16); err != nil {
		return n, &writeError{outputTailFile, err}
	}
	return n, nil
}

func (l *cappedLog) Close() error {
	err := l.head.Close()
	if l.tail != nil {
		err = errors.Join(err, l.tail.Close())
	}
	return err
}

// OutputSize is how much output a task wrote and how much of it is kept.
// When Cut is 0 everything is kept; otherwise the first Head bytes and the
// last Tail bytes are, and the Cut bytes between them are gone.
type OutputSize struct {
	Total int64 `json:"total_bytes"`
	Head  int64 `json:"head_bytes"`
	Tail  int64 `json:"tail_bytes"`
	Cut   int64 `json:"cut_bytes"`
}

// Statement says what was kept of a cut output, e.g. "the task wrote 1.2
// GB of output, 64 MB kept: the first 32 MB and the last 32 MB (1.1 GB
// cut from the middle)"; "" when nothing was cut.
func (o OutputSize) Statement() string {
	if o.Cut <= 0 {
		return ""
	}
	return fmt.Sprintf("the task wrote %s of output, %s kept: the first %s and the last %s (%s cut from the middle)",
		humanBytes(o.Total), humanBytes(o.Head+o.Tail), humanBytes(o.Head), humanBytes(o.Tail), humanBytes(o.Cut))
}

// humanBytes renders n as "812 B", "12.5 KB", "64 MB", "1.2 GB" (powers of
// 1024).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for f >= unit && i < 3 {
		f /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", f)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KB", "MB", "GB", "TB"}[i]
}

// keptOutput reads a task folder's output files. Its methods read only
// the bytes they return.
type keptOutput struct {
	head    *os.File
	tail    *os.File // nil: nothing went past the head
	headN   int64
	ringCap int64
	tailN   int64
}

// openOutput opens dir's output files; fs.ErrNotExist when there is no
// output.log (the job did not start yet, or the folder was pruned).
func openOutput(dir string) (*keptOutput, error) {
	h, err := os.Open(filepath.Join(dir, outputFile))
	if err != nil {
		return nil, err
	}
	fi, err := h.Stat()
	if err != nil {
		h.Close()
		return nil, err
	}
	o := &keptOutput{head: h, headN: fi.Size()}
	t, err := os.Open(filepath.Join(dir, outputTailFile))
	if errors.Is(err, fs.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	var hdr [tailHeader]byte
	if _, err := io.ReadFull(t, hdr[:]); err != nil || string(hdr[:8]) != tailMagic {
		// Created but its header not written yet: nothing past the head.
		t.Close()
		return o, nil
	}
	o.tail = t
	o.ringCap = int64(binary.LittleEndian.Uint64(hdr[8:]))
	o.tailN = int64(binary.LittleEndian.Uint64(hdr[16:]))
	if o.ringCap <= 0 {
		o.tail, o.tailN = nil, 0
		t.Close()
	}
	return o, nil
}

func (o *keptOutput) Close() error {
	err := o.head.Close()
	if o.tail != nil {
		err = errors.Join(err, o.tail.Close())
	}
	return err
}

func (o *keptOutput) size() OutputSize {
	kept := min(o.tailN, o.ringCap)
	return OutputSize{Total: o.headN + o.tailN, Head: o.headN, Tail: kept, Cut: o.tailN - kept}
}

// readRing reads the tail's bytes from stream position from to to, which
// must be kept.
func (o *keptOutput) readRing(buf []byte, from int64) error {
	for len(buf) > 0 {
		off := from % o.ringCap
		k := int(min(o.ringCap-off, int64(len(buf))))
		if _, err := o.tail.ReadAt(buf[:k], tailHeader+off); err != nil && err != io.EOF {
			return err
		}
		buf, from = buf[k:], from+int64(k)
	}
	return nil
}

// last returns the last n bytes of what is kept, starting at a rune. When
// they span a cut, the cut is marked in them with a line stating it.
func (o *keptOutput) last(n int) ([]byte, error) {
	sz := o.size()
	fromTail := min(int64(n), sz.Tail)
	fromHead := min(int64(n)-fromTail, sz.Head)
	var mark string
	if sz.Cut > 0 && fromHead > 0 {
		mark = "\n[… " + humanBytes(sz.Cut) + " of output cut here: " + sz.Statement() + " …]\n"
		fromHead = max(0, fromHead-int64(len(mark)))
	}
	buf := make([]byte, fromHead+int64(len(mark))+fromTail)
	if fromHead > 0 {
		if _, err := o.head.ReadAt(buf[:fromHead], sz.Head-fromHead); err != nil && err != io.EOF {
			return nil, err
		}
	}
	copy(buf[fromHead:], mark)
	if fromTail > 0 {
		if err := o.readRing(buf[fromHead+int64(len(mark)):], o.tailN-fromTail); err != nil {
			return nil, err
		}
	}
	return clip.Tail(buf, len(buf)), nil // the window may start inside a rune
}

// readOutput returns the last n bytes of the output kept in dir (see
// keptOutput.last) and its size.
func readOutput(dir string, n int) ([]byte, OutputSize, error) {
	o, err := openOutput(dir)
	if err != nil {
		return nil, OutputSize{}, err
	}
	defer o.Close()
	b, err := o.last(n)
	return b, o.size(), err
}

// outputSize is the size of the output kept in dir; nil when there is no
// output.log.
func outputSize(dir string) *OutputSize {
	o, err := openOutput(dir)
	if err != nil {
		return nil
	}
	defer o.Close()
	sz := o.size()
	return &sz
}

// ParseSize reads a size in bytes: a number with an optional unit, B, KB,
// MB, GB or TB (powers of 1024; K, M, G, T and KiB… too), e.g. "64MB",
// "512k", "1048576".
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	num := strings.TrimRight(t, "BIKMGT ")
	unit := strings.TrimSpace(t[len(num):])
	mult := map[string]int64{"": 1, "B": 1,
		"K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
		"M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
		"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
		"T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("parse size %q: give a number of bytes with an optional unit, like 64MB or 512KB", s)
	}
	return int64(n * float64(mult)), nil
}
