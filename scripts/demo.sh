#!/usr/bin/env bash
# panio's main job on the embedded default: build a lab from scratch with the
# config commands, then show it. Everything happens in ./demo-out.
set -euo pipefail
cd "$(dirname "$0")/.."
out=demo-out
rm -rf "$out" && mkdir -p "$out"
export PANIO_LAB="$PWD/$out/lab.toml"
export PANIO_STATE_DIR="$PWD/$out/state"
panio=.venv/bin/panio
run() { echo "\$ panio $*"; "$panio" "$@"; }
run init
run target add pico --description "Raspberry Pi 5 on bench 1" --tag pi5
run netboot set -t pico --interface en7 --tftp-root "$PWD/$out/tftp/pico"
run serial add console -t pico --device /dev/ttyUSB0 --baud 115200 --sense CTS
run serial add bmc -t pico --device /dev/ttyUSB1 --baud 9600
run power set -t pico --cycle-cmd "shellyplug -d 192.0.2.41 cycle" --state-cmd "shellyplug -d 192.0.2.41 state"
run config show
echo
echo "lab file written to $PANIO_LAB"
