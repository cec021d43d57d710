"""Examples and see-also of the command groups' own --help pages (``panio serial --help``), in one table.

Every leaf command writes its own (``common.command``); a group's page shows
the two or three commands a newcomer reaches for first.
"""

from __future__ import annotations

GROUPS: dict[str, tuple[tuple[str, ...], str]] = {
    "target": (("panio target add pico --tag pi5", "panio target list --json", "panio target show pico"),
               "panio host, panio serial add, panio power set, docs/lab-file.md"),
    "host": (("panio host add bench1 --ssh ops@bench1.lab", "panio host trust bench1", "panio host list"),
             "panio target add --host, panio ping, docs/remote-hosts.md"),
    "netboot": (("panio netboot set -t pico --interface enx001122 --tftp-root /srv/tftp/pico",
                 "panio netboot tftp-root pico"), "panio discover (network links), panio doctor, docs/netboot.md"),
    "netif": (("panio netif status pico", "panio netif mode ffx pico", "panio netif down-hard pico"),
              "panio netboot, panio power-cycle, docs/netboot.md"),
    "video": (("panio video set -t pico --device /dev/video0", "panio video show -t pico"),
              "panio discover (capture devices), panio doctor, docs/lab-file.md"),
    "hid": (("panio hid set -t pico --device /dev/ttyUSB1", "panio hid show -t pico"),
            "panio discover, panio doctor, docs/lab-file.md"),
    "adb": (("panio adb set -t phone --serial R58M123ABC", "panio adb show -t phone"),
            "panio discover (adb devices), panio doctor, docs/lab-file.md"),
    "config": (("panio config show", "panio config show --json"), "panio target list, panio doctor, docs/lab-file.md"),
    "serial": (("panio serial add console -t pico --device /dev/ttyUSB0", "panio serial watch pico",
                "panio serial log pico --tail 50", "panio serial transact pico 'uname -a' --until '# '"),
               "panio daemons, panio skill, docs/serial.md"),
    "power": (("panio power set -t pico --on-cmd 'shellyplug -d 192.0.2.41 on' --off-cmd "
               "'shellyplug -d 192.0.2.41 off'", "panio power on pico", "panio power-cycle pico"),
              "panio power-cycle, panio power-state, panio helper, docs/power.md"),
    "action": (("panio action add flash -t pico --command 'make flash'", "panio action run pico flash",
                "panio action list pico"), "panio power-state (requires_power), docs/configuration.md"),
    "job": (("panio job check smoke.toml", "panio job run smoke.toml", "panio job status 1 --json"),
            "panio suite, panio lease, panio worker, docs/jobs.md"),
    "suite": (("panio suite check nightly.toml", "panio suite run nightly.toml"),
              "panio job, panio schedule, docs/jobs.md"),
    "schedule": (("panio schedule add nightly --suite nightly.toml --at 02:00", "panio schedule list"),
                 "panio suite, docs/jobs.md"),
    "lease": (("panio lease list", "panio lease break pico"), "panio job status, docs/jobs.md"),
    "keys": (("panio keys init", "panio keys trust bench1.crt", "panio keys list"),
             "panio setup, panio worker, docs/security.md"),
}


# Commands a newcomer types as two words that are one top-level command.
MOVED = {"panio power cycle": "panio power-cycle", "panio power state": "panio power-state",
         "panio serial cycle": "panio power-cycle"}


def epilog(group: str) -> str | None:
    if group not in GROUPS:
        return None
    examples, see_also = GROUPS[group]
    return "example:\n" + "\n".join(f"  {e}" for e in examples) + f"\n\nsee also: {see_also}"
