"""SimBoard: one simulated board — its console on a PTY and the Shelly plug that powers it.

The plug's relay switches the console's power and records it in a state file
(``on``/``off``) that the ``simboard://`` pyserial handler reads as the sense
line. ``python -m bench_agent.sim.board --dir DIR --name NAME`` hosts one
board until SIGTERM and writes ``DIR/NAME.json`` (pid, device, plug port)
when it is ready; ``panio-sim up`` starts these.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench_agent.sim.console import SimConsole
from bench_agent.sim.plug import SimPlug


class SimBoard:
    def __init__(self, name: str, directory: Path, *, gen: int = 2, password: str | None = None,
                 boot_s: float = 1.0, countdown_s: float = 3.0, powered: bool = True, port: int = 0) -> None:
        self.name, self.dir, self.gen, self.password = name, Path(directory), gen, password
        self.state_file = self.dir / f"{name}.power"
        self._write_state(powered)
        self.console = SimConsole(str(self.dir / f"{name}.tty"), banner=f"panio simulated board {name}",
                                  boot_s=boot_s, countdown_s=countdown_s, powered=powered)
        self.plug = SimPlug(gen=gen, password=password, output=powered, port=port, on_switch=self._switch)

    @property
    def url(self) -> str:
        """The device string for the lab file: the PTY through the ``simboard://`` handler."""
        return f"simboard://{quote(self.console.device)}?state={quote(str(self.state_file))}"

    def start(self) -> SimBoard:
        self.console.start()
        self.plug.start()
        return self

    def close(self) -> None:
        self.plug.close()
        self.console.close()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "pid": os.getpid(), "device": self.url, "pty": self.console.device,
                "state_file": str(self.state_file), "plug": f"127.0.0.1:{self.plug.port}", "gen": self.gen,
                "password": bool(self.password)}

    def _switch(self, on: bool) -> None:
        self._write_state(on)
        if on:
            self.console.power_on()
        else:
            self.console.power_off()

    def _write_state(self, on: bool) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text("on\n" if on else "off\n")
        os.replace(tmp, self.state_file)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench_agent.sim.board", description="Host one simulated board until SIGTERM.")
    p.add_argument("--dir", required=True, type=Path)
    p.add_argument("--name", required=True)
    p.add_argument("--gen", type=int, choices=(1, 2), default=2)
    p.add_argument("--password")
    p.add_argument("--boot-s", type=float, default=1.0)
    p.add_argument("--countdown-s", type=float, default=3.0)
    p.add_argument("--off", action="store_true", help="start powered off")
    a = p.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    board = SimBoard(a.name, a.dir, gen=a.gen, password=a.password or os.environ.get("PANIO_SIM_PASSWORD"),
                     boot_s=a.boot_s, countdown_s=a.countdown_s, powered=not a.off).start()
    ready = a.dir / f"{a.name}.json"
    tmp = ready.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(board.describe()))
    os.replace(tmp, ready)
    while not done.wait(3600):
        pass
    board.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
