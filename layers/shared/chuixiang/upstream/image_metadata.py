"""A generated picture without the text a model or a proxy put beside it.

A PNG's ``tEXt``/``zTXt``/``iTXt``/``eXIf`` chunks and a JPEG's comment and APP1-APP15 segments (Exif, XMP…)
can carry anything (a prompt, a key echoed by a proxy); the picture is stored and served to every poller, so
only what draws it is kept: a PNG's other chunks up to ``IEND``, a JPEG's JFIF header, ICC profile
(APP2, colours), tables and scan. A structure that does not parse is an invalid answer, not a picture.
"""

from __future__ import annotations

import struct

from .failures import InvalidAnswer

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Ancillary PNG chunks that hold text or metadata, never pixels.
PNG_TEXT_CHUNKS = frozenset({b"tEXt", b"zTXt", b"iTXt", b"eXIf"})
#: JPEG markers whose segments hold metadata: APP1-APP15 (APP0 is JFIF, APP2 is also where ICC profiles live,
#: so only APP2 segments that are not ICC are dropped), and COM.
_COM, _SOS, _EOI = 0xFE, 0xDA, 0xD9


def picture_only(data: bytes, extension: str) -> bytes:
    """``data`` with its text and metadata removed (PNG, JPEG; another type as it is)."""
    if extension == "png":
        return _png(data)
    if extension == "jpg":
        return _jpeg(data)
    return data


def _png(data: bytes) -> bytes:
    out, at = bytearray(PNG_SIGNATURE), len(PNG_SIGNATURE)
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, end = data[at + 4 : at + 8], at + 12 + length
        if end > len(data):
            raise InvalidAnswer(f"PNG chunk {kind!r} runs past the end of the picture")
        if kind not in PNG_TEXT_CHUNKS:
            out += data[at:end]
        if kind == b"IEND":
            return bytes(out)  # anything after IEND is not the picture
        at = end
    raise InvalidAnswer("PNG without an IEND chunk")


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
        if not _metadata(marker, data[at + 4 : end]):
            out += data[at:end]
        at = end
    raise InvalidAnswer("JPEG without a scan")


def _metadata(marker: int, payload: bytes) -> bool:
    if marker == _COM:
        return True
    if marker == 0xE2:  # APP2: keep an ICC profile (it gives the colours), drop anything else there
        return not payload.startswith(b"ICC_PROFILE\x00")
    return 0xE1 <= marker <= 0xEF
