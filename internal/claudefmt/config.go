package claudefmt

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf16"
)

// ConfigDir is Claude Code's config folder for the environment given by
// getenv: $CLAUDE_CONFIG_DIR when set, else $HOME/.claude.
func ConfigDir(getenv func(string) string) (string, error) {
	if d := getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return filepath.Abs(d)
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find Claude Code's folder: %w: set HOME or CLAUDE_CONFIG_DIR", err)
		}
		home = h
	}
	return filepath.Join(home, ".claude"), nil
}

// MungePath is the folder name Claude Code gives a working directory under
// projects/: every UTF-16 code unit that is not [A-Za-z0-9] becomes "-";
// a result longer than 200 is cut to 200 and "-" plus the base-36 djb2
// hash of the path is appended (docs/engines/claude-code.md, "Transcripts").
func MungePath(path string) string {
	units := utf16.Encode([]rune(path))
	b := make([]byte, len(units))
	var h int32
	for i, u := range units {
		h = (h << 5) - h + int32(u)
		switch {
		case u >= 'a' && u <= 'z', u >= 'A' && u <= 'Z', u >= '0' && u <= '9':
			b[i] = byte(u)
		default:
			b[i] = '-'
		}
	}
	if len(b) <= 200 {
		return string(b)
	}
	abs := int64(h)
	if abs < 0 {
		abs = -abs
	}
	return string(b[:200]) + "-" + strconv.FormatInt(abs, 36)
}
