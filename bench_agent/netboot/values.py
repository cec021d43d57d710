"""What a netboot value may be: each one ends up in a generated config file, a sysfs path or a served folder.

The lab file's schema, ``panio netboot set`` and the host (``Settings``, the
dnsmasq config writer, the TFTP server) all check with these functions, so
the rules are written once. Each raises ``BadValue`` with a sentence that
names the value and the rule; the caller adds where the value came from
(``--boot-file``, ``targets.pico.netboot.boot_file``) and its own error class.

Why: panio writes ``dnsmasq.conf`` line by line and dnsmasq runs as root. A
newline in a boot file became its own directive (``dhcp-script=...`` runs a
command), a comma starts another field, ``#`` after a space a comment. An
interface name reaches ``/sys/class/net/NAME``, a USB port
``/sys/bus/usb/devices/PORT``. A TFTP root of ``/`` served ``/etc/shadow`` to
anyone on the link.
"""

from __future__ import annotations

import os
import re

INTERFACE_RE = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,14}\Z")  # IFNAMSIZ: 15 characters
BOOT_FILE_RE = re.compile(r"[A-Za-z0-9_./+:@%=~][A-Za-z0-9_./+:@%=~-]{0,254}\Z")
USB_PORT_RE = re.compile(r"[0-9]{1,3}-[0-9]{1,3}(\.[0-9]{1,3}){0,6}\Z")  # Linux's bus-port[.port...]: 1-1.2
ROOT_EXTRA_CHARS = "/._-+@%~:"  # besides letters and digits, in a TFTP root
WIDEST_PREFIX, NARROWEST_PREFIX = 16, 30  # /16 already offers 65,533 leases on one board's link

# Never served, nor anything below them: the system's own files, devices, kernel state, root's home.
SYSTEM_TREES = ("/etc", "/proc", "/sys", "/dev", "/boot", "/root", "/run", "/usr", "/bin", "/sbin", "/lib", "/lib32",
                "/lib64", "/libx32", "/var/log", "/var/mail", "/var/spool", "/var/backups", "/snap")
# Never served themselves (they hold everyone's files); a folder made for TFTP below them is fine (/srv/tftp).
SHARED_TOPS = ("/", "/home", "/var", "/var/lib", "/var/tmp", "/var/cache", "/srv", "/opt", "/tmp", "/mnt", "/media")


class BadValue(ValueError):
    """A netboot value panio will not write into a config file or serve from."""


def interface(name: str) -> None:
    _string(name)
    if not INTERFACE_RE.match(name) or ".." in name or name == ".":
        raise BadValue(f"{name!r} is not an interface name: 1 to 15 of letters, digits, '_', '.', ':', '-', "
                       "not starting with '-', no '..' or '/'")


def boot_file(name: str) -> None:
    _string(name)
    if not BOOT_FILE_RE.match(name) or ".." in name.split("/"):
        raise BadValue(f"{name!r} is not a boot file name: up to 255 of letters, digits and _ . / + : @ % = ~ -, "
                       "not starting with '-', no '..', no spaces, commas, quotes or control characters")


def usb_port(name: str) -> None:
    _string(name)
    if not USB_PORT_RE.match(name):
        raise BadValue(f"{name!r} is not a USB port: BUS-PORT[.PORT...] as in /sys/bus/usb/devices, e.g. 1-1.2")


def address(text: str) -> None:
    """The host's own address on the link, with its prefix: what the DHCP range is carved from."""
    import ipaddress

    _string(text)
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        raise BadValue(f"{text!r} is not an address with a prefix, e.g. 10.233.0.1/24") from None
    net = iface.network
    if iface.version != 4 or "/" not in text or not WIDEST_PREFIX <= net.prefixlen <= NARROWEST_PREFIX:
        raise BadValue(f"{text!r} must be IPv4 with a prefix from /{WIDEST_PREFIX} to /{NARROWEST_PREFIX}, "
                       "e.g. 10.233.0.1/24")
    ip = iface.ip
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved or ip.is_loopback or ip in (net.network_address,
                                                                                         net.broadcast_address):
        raise BadValue(f"{text!r} is not a host address of its network (not 0.0.0.0, loopback, multicast, "
                       "reserved, nor the network or broadcast address)")


def home_form(path: str) -> str:
    """``$HOME/x`` and ``${HOME}/x`` as ``~/x``: what a shell user writes for their home, read the same way."""
    for prefix in ("${HOME}", "$HOME"):
        if path == prefix or path.startswith(prefix + "/"):
            return "~" + path[len(prefix):]
    return path


def tftp_root(path: str) -> None:
    """The folder as written (``~/tftp/pico``, an absolute path): its characters, and not a system folder.

    Only the text is checked: the folder is on the host that serves it, which may not be this machine.
    ``served_root`` checks the folder itself, there.
    """
    _folder_text(path, "TFTP root")


def stage_from(path: str) -> None:
    """The folder ``netboot stage`` may take files from (``/srv/builds``), written by the rule of a TFTP root:
    every file below it can be handed to anyone on the link, so never a system folder or a home directory."""
    _folder_text(path, "stage_from folder")


def served_root(path: str) -> str:
    """The real folder behind ``path`` (symlinks resolved), checked again on the host that serves it: a
    directory, not a system folder, not this user's home nor a folder holding it. A missing folder is
    returned as is (the caller says how to create it)."""
    return _real_folder(path, "TFTP root")


def stage_root(path: str) -> str:
    """``served_root`` for the ``stage_from`` folder, on the host that stages from it."""
    return _real_folder(path, "stage_from folder")


STAGE_NAME_RE = re.compile(r"[A-Za-z0-9_+@%=~:][A-Za-z0-9_.+@%=~:-]{0,254}\Z")
STAGE_MAX_DEPTH = 8  # components of a staged path: pxelinux.cfg/default is 2, kernels/v5/bzImage 3
STAGE_MAX_CHARS = 1024


def stage_name(name: str) -> list[str]:
    """The path ``netboot stage`` gives a file in the TFTP root, as its parts: one plain file name
    (``kernel8.img``) or a relative path of them (``pxelinux.cfg/default``), never absolute, never ``..``."""
    _string(name)
    parts = name.split("/")
    shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "..."
    if len(name) > STAGE_MAX_CHARS or len(parts) > STAGE_MAX_DEPTH:
        raise BadValue(f"{shown} is not a name to stage as: at most {STAGE_MAX_DEPTH} parts (FOLDER/.../NAME) "
                       f"and {STAGE_MAX_CHARS} characters")
    if len(parts) > 1 and not all(parts):
        raise BadValue(f"{shown} is not a name to stage as: a path in the TFTP root is relative "
                       "(pxelinux.cfg/default), with no leading, trailing or double '/'")
    bad = next((p for p in parts if not STAGE_NAME_RE.match(p)), None)
    if bad is not None:
        part = "" if len(parts) == 1 else f" (its part {bad!r})"
        raise BadValue(f"{shown}{part} is not a name to stage as: each part 1 to 255 of letters, digits and "
                       "_ . + - @ % = ~ :, not starting with '.' or '-', no spaces or control characters")
    return parts


def _folder_text(path: str, what: str) -> None:
    _string(path)
    path = home_form(path)
    if not path or any(not (c.isalnum() or c in ROOT_EXTRA_CHARS) for c in path) or "~" in path[1:]:
        raise BadValue(f"{path!r} is not a {what} panio will serve: letters, digits and {ROOT_EXTRA_CHARS} "
                       "only (no spaces, commas, quotes or control characters), '~' only at the start")
    if path.startswith("~"):
        if "/" not in path.rstrip("/"):
            raise BadValue(f"{path!r} is a home directory: serving it would hand out its ~/.ssh; "
                           "give a folder made for TFTP, e.g. ~/tftp/TARGET")
        return
    if not path.startswith("/"):
        raise BadValue(f"{path!r} is relative: give an absolute path or one starting with ~/")
    _not_system("/" + os.path.normpath(path).lstrip("/"), path, what)  # POSIX keeps a leading "//"


def _real_folder(path: str, what: str) -> str:
    _folder_text(path, what)
    real = os.path.realpath(os.path.expanduser(home_form(path)))
    if os.path.exists(real) and not os.path.isdir(real):
        raise BadValue(f"the {what} {path} is not a directory")
    _not_system(real, path, what)
    home = os.path.realpath(os.path.expanduser("~"))
    if real == home or home.startswith(real.rstrip("/") + "/"):
        raise BadValue(f"the {what} {path} ({real}) is or holds the home directory {home}: serving it would "
                       "hand out its ~/.ssh; give a folder made for TFTP, e.g. ~/tftp/TARGET")
    return real


def _string(value: object) -> None:
    if not isinstance(value, str):
        raise BadValue(f"{value!r} is not a string")


def _not_system(norm: str, given: str, what: str) -> None:
    shown = given if norm == given else f"{given} ({norm})"
    if norm in SHARED_TOPS or any(norm == t or norm.startswith(t + "/") for t in SYSTEM_TREES):
        raise BadValue(f"the {what} {shown} is a system folder: anyone on the link could read every file in it; "
                       "give a folder made for TFTP, e.g. /srv/tftp/TARGET")
    if os.path.dirname(norm) == "/home":
        raise BadValue(f"the {what} {shown} is a home directory: serving it would hand out its ~/.ssh; "
                       "give a folder made for TFTP, e.g. ~/tftp/TARGET")
