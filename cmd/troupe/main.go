// Command troupe runs a team of AI coding agents on your projects: the daemon
// (`troupe serve`) and the CLI that talks to it. All logic lives in
// internal/cli; this file only hands it the process's arguments.
package main

import (
	"context"
	"os"

	"github.com/troupe-dev/troupe/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
