"""A generated picture as pixels only: what draws it is kept, everything else is dropped.

A picture is stored and served to every poller, and a model or a proxy can write anything beside its pixels: a
prompt, or a key it echoed (seen in a PNG's ``iCCP``, ``sPLT`` and private chunks as well as its text chunks). So
the structure is read as an **allowlist**, not a list of known text chunks:

- PNG: the chunks that draw it (``IHDR``, ``PLTE``, ``IDAT``, ``IEND``) and the colour chunks whose fields have a
  fixed size and no free text (``gAMA``, ``cHRM``, ``sRGB``, ``tRNS``), each checked for its length. An ICC profile
  (``iCCP``) is dropped: its name and its tags are free text; a generated picture is sRGB.
- JPEG: the frame, the tables, the restart interval, the scan, and a JFIF header without a thumbnail. Comments,
  APP1-APP15 (Exif, XMP, ICC profiles…) are dropped.
- WebP: the bitstream (``VP8 ``, ``VP8L``), its alpha and animation chunks, and ``VP8X`` with the flags of the
  dropped ``ICCP``, ``EXIF`` and ``XMP `` chunks cleared.

A structure that does not parse is an invalid answer, not a picture.
"""

from __future__ import annotations

import struct

from .failures import InvalidAnswer

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG chunks kept, and the length each must have (None: any).
PNG_KEPT: dict[bytes, int | None] = {
    b"IHDR": 13,
    b"PLTE": None,
    b"IDAT": None,
    b"IEND": 0,
    b"gAMA": 4,
    b"cHRM": 32,
    b"sRGB": 1,
    b"tRNS": None,  # checked against the colour type (:func:`_trns_fits`)
}
_SOS, _EOI = 0xDA, 0xD9
#: JPEG markers kept: the frames and Huffman/arithmetic tables (0xC0-0xCF but 0xC8, reserved), the quantisation
#: tables, the restart interval; APP0 only as a JFIF header without a thumbnail (:func:`_jfif_plain`).
_JPEG_KEPT = frozenset({*range(0xC0, 0xC8), *range(0xC9, 0xD0), 0xDB, 0xDD})
_APP0 = 0xE0
#: WebP chunks kept (the rest: ICCP, EXIF, XMP and anything unknown, dropped).
_WEBP_KEPT = frozenset({b"VP8 ", b"VP8L", b"VP8X", b"ALPH", b"ANIM", b"ANMF"})
#: VP8X flag bits of the chunks dropped: ICC profile (0x20), EXIF (0x08), XMP (0x04).
_VP8X_DROPPED_FLAGS = 0x20 | 0x08 | 0x04


def picture_only(data: bytes, extension: str) -> bytes:
    """``data`` with everything but what draws it removed (PNG, JPEG, WebP; another type as it is)."""
    if extension == "png":
        return _png(data)
    if extension == "jpg":
        return _jpeg(data)
    if extension == "webp":
        return _webp(data)
    return data


def _png(data: bytes) -> bytes:
    out, at = bytearray(PNG_SIGNATURE), len(PNG_SIGNATURE)
    colour_type, palette = -1, 0
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, end = data[at + 4 : at + 8], at + 12 + length
        if end > len(data):
            raise InvalidAnswer(f"PNG chunk {kind!r} runs past the end of the picture")
        if kind == b"IHDR" and length == 13:
            colour_type = data[at + 8 + 9]
        if kind == b"PLTE":
            palette = length // 3
        if _png_kept(kind, length, colour_type, palette):
            out += data[at:end]
        if kind == b"IEND":
            return bytes(out)  # anything after IEND is not the picture
        at = end
    raise InvalidAnswer("PNG without an IEND chunk")


def _png_kept(kind: bytes, length: int, colour_type: int, palette: int) -> bool:
    if kind not in PNG_KEPT:
        return False
    if kind == b"tRNS":
        return _trns_fits(length, colour_type, palette)
    wanted = PNG_KEPT[kind]
    return wanted is None or length == wanted


def _trns_fits(length: int, colour_type: int, palette: int) -> bool:
    """A ``tRNS`` chunk's length for the picture's colour type (PNG spec 11.3.2.1): one grey sample (2 bytes),
    one RGB colour (6), or at most an alpha per palette entry."""
    return {0: length == 2, 2: length == 6, 3: 0 < length <= palette}.get(colour_type, False)


def _jpeg(data: bytes) -> bytes:
    out, at = bytearray(data[:2]), 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            raise InvalidAnswer(f"JPEG segment without a marker at byte {at}")
        marker = data[at + 1]
        if marker == _EOI:
            return bytes(out + data[at : at + 2])
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        end = at + 2 + length
        if end > len(data):
            raise InvalidAnswer(f"JPEG segment {marker:#x} runs past the end of the picture")
        if marker == _SOS:
            return bytes(out + data[at:])  # the scan and what follows it: the pixels
        if marker in _JPEG_KEPT or (marker == _APP0 and _jfif_plain(data[at + 4 : end])):
            out += data[at:end]
        at = end
    raise InvalidAnswer("JPEG without a scan")


def _jfif_plain(payload: bytes) -> bool:
    """A JFIF APP0 header with no thumbnail: its 14 bytes are fixed fields."""
    return len(payload) == 14 and payload.startswith(b"JFIF\x00") and payload[12:14] == b"\x00\x00"


def _webp(data: bytes) -> bytes:
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise InvalidAnswer("WebP without its RIFF header")
    out, at = bytearray(), 12
    while at + 8 <= len(data):
        kind, (length,) = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])
        end = at + 8 + length + (length & 1)  # chunks are padded to an even length
        if at + 8 + length > len(data):
            raise InvalidAnswer(f"WebP chunk {kind!r} runs past the end of the picture")
        if kind in _WEBP_KEPT:
            chunk = bytearray(data[at:end])
            if kind == b"VP8X" and length >= 1:
                chunk[8] &= ~_VP8X_DROPPED_FLAGS & 0xFF
            out += chunk
        at = end
    if not out:
        raise InvalidAnswer("WebP without a bitstream")
    return b"RIFF" + struct.pack("<I", 4 + len(out)) + b"WEBP" + bytes(out)
