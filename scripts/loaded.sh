#!/bin/bash
# Run a command beside CPU-bound busy loops, one per core unless HOGS says otherwise, and end them after it:
#   bash scripts/loaded.sh make test
# The suite must pass on a loaded machine as on a quiet one (a test that waits on a fixed sleep, or whose
# deadline assumes a free core, fails here first). Exits with the command's status.
set -u
hogs=${HOGS:-$(nproc)}
pids=()
for _ in $(seq 1 "$hogs"); do
	( while :; do :; done ) &
	pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "loaded.sh: $hogs busy loop(s) beside: $*" >&2
started=$(date +%s)
"$@"
status=$?
echo "loaded.sh: exit $status after $(( $(date +%s) - started )) s beside $hogs busy loop(s)" >&2
exit $status
