#!/bin/sh
# Copies the attempt demo into a throwaway folder, makes it a git
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
dir=$(mktemp -d "${TMPDIR:-/tmp}/troupe-attempt-demo.XXXXXX")
cp -R "$here/." "$dir/"
rm -f "$dir/run.sh"
git -C "$dir" init -q -b main
git -C "$dir" add -A
git -C "$dir" -c user.name="troupe demo" -c user.email=demo@troupe.invalid -c commit.gpgsign=false \
	commit -q -m "attempt demo: start"
echo "demo repository: $dir"
echo "in another terminal, try (README.md in it says what to expect):"
echo "  cd $dir"
echo "  $troupe${*:+ $*} attempt 'make sh test.sh pass' --agents fixer,breaker,idle --wait"
echo "  $troupe${*:+ $*} merge fixer"
echo "  $troupe${*:+ $*} attempt discard 1 --yes"
if "$troupe" "$@" status >/dev/null 2>&1; then
	exec "$troupe" "$@" project add "$dir"
fi
exec "$troupe" "$@" serve --project "$dir"
