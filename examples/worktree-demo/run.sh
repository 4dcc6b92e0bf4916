#!/bin/sh
# Copies the worktree demo into a throwaway folder, makes it a git
# repository with one commit, then serves it with troupe (or adds it to the
# daemon already running). Arguments are troupe's global flags, such as
# --state-dir DIR. TROUPE names the troupe binary (default: bin/troupe of
# this checkout, built by `make build`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
troupe=${TROUPE:-$here/../../bin/troupe}
if [ ! -x "$troupe" ]; then
	echo "no troupe binary at $troupe: run make build first" >&2
	exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/troupe-worktree-demo.XXXXXX")
cp -R "$here/." "$dir/"
rm -f "$dir/run.sh"
git -C "$dir" init -q -b main
git -C "$dir" add -A
git -C "$dir" -c user.name="troupe demo" -c user.email=demo@troupe.invalid -c commit.gpgsign=false \
	commit -q -m "worktree demo: start"
echo "demo repository: $dir"
echo "in another terminal, try (README.md in it says what to expect):"
echo "  cd $dir"
echo "  $troupe${*:+ $*} ask a 'change the greeting'"
echo "  $troupe${*:+ $*} ask b 'change the greeting'"
echo "  $troupe${*:+ $*} diff a"
echo "  $troupe${*:+ $*} merge a"
echo "  $troupe${*:+ $*} merge b"
if "$troupe" "$@" status >/dev/null 2>&1; then
	exec "$troupe" "$@" project add "$dir"
fi
exec "$troupe" "$@" serve --project "$dir"
