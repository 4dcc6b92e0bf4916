#!/bin/sh
# The runner demo (README.md here): a daemon and a runner on this machine
# as if they were two. In a throwaway folder: project/ (a git repository of
# this folder) and daemon/ (the daemon's state dir) are the daemon's
# machine; box/ (the runner's HOME, its root and its copy of the
# credentials) is the runner's. It starts the daemon with runners enabled,
# mints runner box's credentials, copies them to box/, starts the runner,
# prints what to try and waits; Ctrl-C stops both. TROUPE names the troupe
# binary (default: bin/troupe of this checkout, built by `make build`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
troupe=${TROUPE:-$here/../../bin/troupe}
if [ ! -x "$troupe" ]; then
	echo "no troupe binary at $troupe: run make build first" >&2
	exit 1
fi
troupe=$(cd "$(dirname "$troupe")" && pwd)/$(basename "$troupe")
base=$(mktemp -d "${TMPDIR:-/tmp}/troupe-runner-demo.XXXXXX")
proj=$base/project state=$base/daemon box=$base/box
mkdir -p "$proj" "$box"
cp -R "$here/." "$proj/"
rm -f "$proj/run.sh"
git -C "$proj" init -q -b main
git -C "$proj" add -A
git -C "$proj" -c user.name="troupe demo" -c user.email=demo@troupe.invalid -c commit.gpgsign=false \
	commit -q -m "runner demo: start"

daemon='' runner=''
# The daemon stops first (it closes its agents' sessions on the runner),
# then the runner.
stop() {
	trap - EXIT INT TERM
	if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" || true; fi
	if [ -n "$runner" ]; then kill "$runner" 2>/dev/null || true; wait "$runner" || true; fi
}
trap stop EXIT
trap 'exit 130' INT TERM

# The daemon's machine: the API on a free port of loopback, the runners'
# bus (an embedded NATS server) on another; its state in daemon/.
"$troupe" --state-dir "$state" serve --addr 127.0.0.1:0 --runners 127.0.0.1:0 --project "$proj" \
	>"$base/daemon.log" 2>&1 &
daemon=$!
until "$troupe" --state-dir "$state" status >/dev/null 2>&1; do
	if ! kill -0 "$daemon" 2>/dev/null; then
		echo "the daemon stopped; its log ($base/daemon.log):" >&2
		cat "$base/daemon.log" >&2
		exit 1
	fi
	sleep 0.2
done
"$troupe" --state-dir "$state" runner add box -o "$state/box.creds" >/dev/null
cp "$state/box.creds" "$box/box.creds" # as you would copy it to the other machine

# The runner's machine: its own HOME, its clones and worktrees under box/root.
HOME=$box "$troupe" runner --creds "$box/box.creds" --root "$box/root" \
	>"$base/box.log" 2>&1 &
runner=$!
until grep -q 'connected to the daemon' "$base/box.log"; do
	if ! kill -0 "$runner" 2>/dev/null; then
		echo "the runner stopped; its log ($base/box.log):" >&2
		cat "$base/box.log" >&2
		exit 1
	fi
	sleep 0.2
done

t="$troupe --state-dir $state"
echo "runner demo: $base"
echo "  the daemon's machine: project/ (the repository) and daemon/ (state; log daemon.log)"
echo "  runner box's machine: box/ (HOME, root, credentials; log box.log)"
echo "ready: in another terminal, try (README.md says what to expect):"
echo "  cd $proj"
echo "  $t ask lead 'take notes'"
echo "  $t runners"
echo "  $t diff coder"
echo "Ctrl-C stops the daemon and the runner."
wait
