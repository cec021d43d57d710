#!/usr/bin/env bash
# A kernel for the QEMU board (bench_agent/sim/qemu_image.py), cached, never installed.
# Idempotent. Prefers a readable /boot/vmlinuz-* (its modules are in /lib/modules); else downloads the
# current Debian kernel package (the image linux-image-amd64 depends on) and extracts only boot/vmlinuz-*
# and the USB/HID modules the board's pointer (and a USB gadget test) needs, into modules/ beside it.
# The initramfs is built by panio itself from busybox-static on first use.
set -euo pipefail

cache="${PANIO_QEMU_CACHE:-/var/cache/panio/qemu}"
[ "$(id -u)" = 0 ] || cache="${PANIO_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/panio/qemu}"
mkdir -p "$cache"
if [ -s "$cache/vmlinuz" ] && [ -z "${PANIO_QEMU_REFETCH:-}" ]; then
  exit 0
fi

installed=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1 || true)
if [ -n "$installed" ] && [ -r "$installed" ] && [ -z "${PANIO_QEMU_REFETCH:-}" ]; then
  cp "$installed" "$cache/vmlinuz.tmp" && mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
  echo "qemu-board-image: kernel from $installed"
  exit 0
fi

pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
  [ "$(id -u)" = 0 ] && apt-get update -qq || true
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[ -n "$pkg" ] || { echo "qemu-board-image: no linux-image-amd64 in the apt sources" >&2; exit 1; }
work=$(mktemp -d)
chown _apt "$work" 2>/dev/null || chmod 777 "$work"   # apt downloads as its sandbox user, _apt
trap 'rm -rf "$work"' EXIT
echo "qemu-board-image: downloading $pkg (not installing it)"
(cd "$work" && apt-get download -qq "$pkg" >/dev/null)
# The pointer's modules, and a USB gadget's (tests/test_hid_gadget_qemu.py: f_hid on dummy_hcd).
mods='drivers/usb/common/usb-common drivers/usb/core/usbcore drivers/usb/host/uhci-hcd drivers/hid/hid
  drivers/hid/usbhid/usbhid drivers/hid/hid-generic drivers/input/evdev fs/configfs/configfs
  drivers/usb/gadget/udc/udc-core drivers/usb/gadget/udc/dummy_hcd drivers/usb/gadget/libcomposite
  drivers/usb/gadget/function/usb_f_hid'
patterns=('./boot/vmlinuz-*')
for m in $mods; do patterns+=("./lib/modules/*/kernel/$m.ko"); done
dpkg-deb --fsys-tarfile "$work"/*.deb | tar -x -C "$work" --wildcards "${patterns[@]}"
mkdir -p "$cache/modules"
for m in $mods; do cp "$work"/lib/modules/*/kernel/$m.ko "$cache/modules/"; done
cp "$work"/boot/vmlinuz-* "$cache/vmlinuz.tmp" && mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
echo "qemu-board-image: kernel $(basename "$work"/boot/vmlinuz-*) in $cache"
