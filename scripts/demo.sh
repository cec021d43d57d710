#!/usr/bin/env bash
# panio's main job on the embedded default: a bench run with no hardware and no
# server. Starts the simulated bench (boards on pseudo-terminals behind
# Shelly-protocol plugs on loopback), captures their consoles, runs the bundled
# suite (power-cycle, boot to a shell, a console command, power state) on every
# board with the in-process worker, and writes a JUnit file and a report.
# Everything goes to ./demo-out; everything started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/demo-out"
rm -rf "$out" && mkdir -p "$out"
export PANIO_STATE_DIR="$out/state"
export PANIO_LAB="$out/bench/lab.toml"
unset PANIO_BROKER PANIO_RESULTS_URL   # the embedded default: in-process worker, SQLite results
bin="$PWD/.venv/bin"
run() { echo "\$ $*"; "$bin/$@"; }

cleanup() {
  for board in board0 board1; do "$bin/panio" serial stop "$board" >/dev/null 2>&1 || true; done
  "$bin/panio-sim" down --dir "$out/bench" >/dev/null 2>&1 || true
}
trap cleanup EXIT

run panio-sim up --dir "$out/bench" --boards 2
run panio config show
run panio power-state board0
run panio serial watch board0
run panio serial watch board1
status=0
run panio suite run "$out/bench/suite.toml" --junit "$out/junit.xml" --report "$out/report.md" || status=$?
run panio serial log board0 --tail 6
echo
echo "JUnit:  $out/junit.xml"
echo "report: $out/report.md"
echo "history: panio job list   (with PANIO_STATE_DIR=$PANIO_STATE_DIR)"
exit "$status"
