"""Video capture: one small backend interface, frames, hashes and OCR.

A backend turns a ``device`` string from the lab file into frames
(``grab() -> numpy BGR array``) and is closed with ``close()``; the capture
daemon (``bench_agent.video.daemon``) is its only steady user. The device
string picks the backend:

    /dev/videoN, /dev/v4l/...    V4L2 through OpenCV      (backends/v4l2.py)
    http://..., https://...      an MJPEG stream (capture boxes, PiKVM-like,
                                 the simulated board's screen) (backends/mjpeg.py)
    qmp:/path/to/socket          a QEMU display via QMP ``screendump`` (backends/qmp.py)
    adb:SERIAL                   an Android screen via ``adb exec-out screencap -p`` (backends/adb.py)

Frames are compared, not just hashed: a change of at most ``MIN_CHANGED_PX``
pixels (a blinking text cursor is 9x2) does not make a new frame, so
``--changed-since`` and ``--stable`` see what a person would call a change.
OpenCV and tesseract are imported here, inside functions: only video
commands pay for them.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from bench_agent.errors import DeviceError, NotConfigured, UsageError
from bench_agent.video.base import VideoBackend, backend_kind

MIN_CHANGED_PX = 24  # more than a blinking cursor (9x2 px), fewer than a typed character and its cursor move
GREY_DELTA = 40  # a pixel changed when its grey level moved by more than this (JPEG noise stays below)


def open_backend(device: str, width: int | None = None, height: int | None = None,
                 poll_ms: int | None = None) -> VideoBackend:
    """The backend for ``device`` (see the module docstring); ``poll_ms`` paces a device that pushes nothing (adb)."""
    kind = backend_kind(device)
    if kind == "adb":
        from bench_agent.video.backends.adb import AdbBackend

        return AdbBackend(device.removeprefix("adb:"), poll_ms)
    if kind == "mjpeg":
        from bench_agent.video.backends.mjpeg import MjpegBackend

        return MjpegBackend(device)
    if kind == "qmp":
        from bench_agent.video.backends.qmp import QmpBackend

        return QmpBackend(device.removeprefix("qmp:"))
    from bench_agent.video.backends.v4l2 import V4l2Backend

    return V4l2Backend(device, width, height)


def grey(frame: Any) -> Any:
    import cv2

    return frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)


def changed_px(before: Any, after: Any) -> int:
    """How many pixels differ visibly between two greyscale frames (all of them if the size changed)."""
    import cv2

    if before is None or before.shape != after.shape:
        return after.size
    return int(cv2.countNonZero(cv2.threshold(cv2.absdiff(before, after), GREY_DELTA, 255, cv2.THRESH_BINARY)[1]))


def frame_hash(frame: Any) -> str:
    """A short content hash of a frame's pixels (the ``hash=`` that ``--changed-since`` takes)."""
    return hashlib.sha256(frame.tobytes() + repr(frame.shape).encode()).hexdigest()[:16]


def encode_png(frame: Any) -> bytes:
    import cv2

    ok, buf = cv2.imencode(".png", frame)
    if not ok:
        raise DeviceError("could not encode the frame as PNG")
    return buf.tobytes()


def parse_region(text: str | None) -> tuple[int, int, int, int] | None:
    """``X,Y,W,H`` in frame pixels, or None."""
    if not text:
        return None
    try:
        x, y, w, h = (int(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"region must be X,Y,W,H in pixels, not {text!r}", argument="region") from None
    if min(x, y) < 0 or min(w, h) <= 0:
        raise UsageError(f"region {text!r}: X,Y must be >= 0 and W,H > 0", argument="region")
    return x, y, w, h


def crop(frame: Any, region: tuple[int, int, int, int] | None) -> Any:
    if region is None:
        return frame
    x, y, w, h = region
    height, width = frame.shape[:2]
    if x >= width or y >= height:
        raise UsageError(f"region {x},{y},{w},{h} lies outside the {width}x{height} frame", argument="region")
    return frame[y:min(y + h, height), x:min(x + w, width)]


SMALL_FONT_PX = 14  # glyphs at most this tall (a VGA text screen's 9x16 cells: ~10 px) get the small-font path
# Tesseract's typographic readings of a text console's ASCII: a VGA '-' comes back as an em dash
ASCII_OCR = str.maketrans({"\u2014": "-", "\u2013": "-", "\u2010": "-", "\u2011": "-", "\u2212": "-",
                           "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def ocr(frame: Any, region: tuple[int, int, int, int] | None = None) -> str:
    """The text on ``frame`` (or its region): grey, Otsu threshold, upscale, dark text on light, tesseract.

    Pixel rows whose majority is light (a highlighted menu bar on a dark screen,
    or a light screen) are inverted before the whole picture is, so every line
    reaches tesseract as dark text on a light background. A small font (glyphs
    at most ``SMALL_FONT_PX`` tall: a VGA text screen's one-pixel strokes) is
    scaled 3x and its strokes thickened: on random capital words from a QEMU
    VGA screen that read 97-102 of 120 exactly where the plain 2x path read 85-87
    (V read as U most often; benchmarks/ocr_vga.py). Typographic dashes and
    quotes come back as the ASCII a console shows.
    """
    import cv2
    import numpy as np

    img = grey(crop(frame, region))
    one_row = img.shape[0] <= 40
    small = _glyph_height(img) <= SMALL_FONT_PX
    scale = 3 if one_row or small else 2
    img = _text_light_on_dark(cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC))
    if small:
        img = cv2.dilate(img, np.ones((3, 3), np.uint8))  # thicker strokes
    return _tesseract(cv2.bitwise_not(img), "--psm 7" if one_row else "--psm 6").translate(ASCII_OCR)


def _text_light_on_dark(img: Any) -> Any:
    """Otsu-binarised, with each pixel row whose majority is light inverted: all text white on black."""
    import cv2

    _, img = cv2.threshold(img, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    light_rows = img.mean(axis=1) > 127
    img[light_rows] = 255 - img[light_rows]
    return img


def _glyph_height(img: Any) -> int:
    """The median height of the picture's glyphs (connected blobs of text of a few pixels); 0 if none."""
    import cv2
    import numpy as np

    _, _, stats, _ = cv2.connectedComponentsWithStats(_text_light_on_dark(img), connectivity=8)
    heights = stats[1:, cv2.CC_STAT_HEIGHT][stats[1:, cv2.CC_STAT_AREA] >= 4]
    return int(np.median(heights)) if len(heights) else 0


def _tesseract(img: Any, config: str) -> str:
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # 5.7 s -> 0.8 s for a full screen on 2 cores
    import pytesseract

    try:
        text = pytesseract.image_to_string(img, config=config)
    except pytesseract.TesseractNotFoundError as exc:
        raise NotConfigured("tesseract is not installed on this host",
                            hint="install tesseract-ocr (scripts/system-deps.sh does)") from exc
    except pytesseract.TesseractError as exc:
        raise DeviceError(f"tesseract failed: {exc}") from exc
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def load_needle(data: bytes) -> Any:
    """A needle image (PNG/JPEG bytes) for ``find_image``; a ``UsageError`` if it is not one."""
    import cv2
    import numpy as np

    try:
        needle = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE) if data else None
    except cv2.error:
        needle = None
    if needle is None or min(needle.shape) < 2:
        raise UsageError("the needle is not an image OpenCV can read (give a PNG cut from a shot)", argument="image")
    if needle.min() == needle.max():  # a flat needle correlates with nothing (the score is undefined)
        raise UsageError("the needle is one flat colour: cut one with some detail in it", argument="image")
    return needle


def find_image(frame: Any, needle: Any, region: tuple[int, int, int, int] | None = None) -> dict[str, Any]:
    """Where ``needle`` (greyscale) best matches ``frame`` (normalised cross-correlation): x, y, w, h, score.

    ``score`` is 1.0 for a pixel-exact match and falls towards 0 as the picture
    differs; x, y are frame pixels of the match's top-left corner.
    """
    import cv2

    hay = grey(crop(frame, region))
    h, w = needle.shape[:2]
    if h > hay.shape[0] or w > hay.shape[1]:
        raise UsageError(f"the needle ({w}x{h}) is larger than the picture searched ({hay.shape[1]}x{hay.shape[0]})",
                         argument="image")
    _, score, _, (x, y) = cv2.minMaxLoc(cv2.matchTemplate(hay, needle, cv2.TM_CCOEFF_NORMED))
    ox, oy = region[:2] if region else (0, 0)
    return {"x": x + ox, "y": y + oy, "w": w, "h": h, "score": round(float(score), 4)}


def to_logical(px: float, size: int) -> int:
    """A pixel coordinate as panio's 0..32767 HID logical units (what ``hid send moveabs`` takes)."""
    return round(px * 32767 / max(1, size - 1))
