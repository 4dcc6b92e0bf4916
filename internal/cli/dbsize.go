package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/troupe-dev/troupe/internal/inbox"
	"github.com/troupe-dev/troupe/internal/statedir"
)

// storeSize writes the size of the state dir's database (with its WAL
// file) and the retention rule that bounds its messages; nothing when
// there is no database yet. It stats the files: no daemon needed.
func storeSize(w io.Writer, dir string) {
	db := statedir.Dir(dir).DB()
	fi, err := os.Stat(db)
	if err != nil {
		return
	}
	size := fi.Size()
	if wal, err := os.Stat(db + "-wal"); err == nil {
		size += wal.Size()
	}
	r := inbox.DefaultRetention
	fmt.Fprintf(w, "database %s: %s (messages kept per project: %d days, the newest %d and %d MB of text)\n",
		db, mb(size), int(r.Age/(24*time.Hour)), r.Messages, r.Bytes>>20)
}

// mb writes n bytes in MB with one decimal.
func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
