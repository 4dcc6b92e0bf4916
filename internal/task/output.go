package task

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/troupe-dev/troupe/internal/clip"
)

// Bounds of what is read from a task's output.
const (
	// DefaultOutput is what Output returns when asked for 0 bytes or fewer.
	DefaultOutput = 64 << 10
	// MaxOutput caps Output: a bigger request gets the last MaxOutput bytes.
	MaxOutput = 1 << 20
	// messageLines and messageBytes bound the tail quoted in a completion
	// message.
	messageLines = 20
	messageBytes = 2 << 10
	// messageCommand bounds the command quoted in a completion message.
	messageCommand = 120
)

// tailFile returns the last n bytes of the file at path, reading only them:
// it seeks to the end, whatever the file's size. The result starts at a
// UTF-8 rune boundary.
func tailFile(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	off := max(0, size-int64(n))
	buf := make([]byte, size-off)
	k, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return nil, err
	}
	buf = buf[:k]
	if off > 0 {
		buf = clip.Tail(buf, len(buf)) // the window may start inside a rune
	}
	return buf, nil
}

// lastLines returns at most lines lines and bytes bytes of the end of b,
// without the trailing newline, as valid UTF-8.
func lastLines(b []byte, lines, bytesMax int) string {
	b = bytes.TrimRight(b, "\n")
	if len(b) > bytesMax {
		b = clip.Tail(b, bytesMax)
	}
	end := len(b)
	for i := 0; i < lines; i++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			end = -1
			break
		}
		end = j
	}
	if end >= 0 {
		b = b[end+1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// completionText is the text of the message that tells a task's owner how
// it ended, e.g. "task 3f2a `make test` exited 0 after 3.2s. Last lines of
// output:\n…", with what its supervisor stopped of it (left) and the cut
// of its output (size), when there was any.
func completionText(t Task, res Result, left *Stopped, size OutputSize, output []byte) string {
	var sb strings.Builder
	cmd := t.Command
	cmd, _ = clip.Ellipsis(cmd, messageCommand)
	cmd = strings.ReplaceAll(cmd, "\n", " ")
	fmt.Fprintf(&sb, "task %s `%s` ", t.ID, cmd)
	took := "after " + humanDuration(res.EndedAt.Sub(t.StartedAt))
	switch res.State {
	case Exited:
		fmt.Fprintf(&sb, "exited %d %s.", res.ExitCode, took)
	case TimedOut:
		fmt.Fprintf(&sb, "timed out %s (its timeout is %s) and was stopped.", took, t.Timeout)
	case Killed:
		fmt.Fprintf(&sb, "was killed on request %s.", took)
	case Lost:
		fmt.Fprintf(&sb, "was lost %s: %s.", took, res.Reason)
	default:
		fmt.Fprintf(&sb, "failed %s: %s.", took, res.Reason)
	}
	if s := left.Statement(); s != "" {
		sb.WriteString(" Its supervisor " + s + ".")
	}
	if s := size.Statement(); s != "" {
		sb.WriteString(" Output cut: " + s + ".")
	}
	if tail := lastLines(output, messageLines, messageBytes); tail != "" {
		sb.WriteString(" Last lines of output:\n")
		sb.WriteString(tail)
	} else {
		sb.WriteString(" It wrote no output.")
	}
	return sb.String()
}

// humanDuration renders d as "3.2s" under a minute, "4m10s" above.
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
