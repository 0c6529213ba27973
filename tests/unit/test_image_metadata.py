"""A generated picture is stored without the text beside its pixels (a PNG's text chunks, a JPEG's comment and
Exif/XMP segments): it is served to every poller, and a proxy or a model can write anything there."""

from __future__ import annotations

import struct
import zlib

import pytest

from chuixiang.upstream.failures import InvalidAnswer
from chuixiang.upstream.image_metadata import PNG_SIGNATURE, picture_only

KEY = "team-key-7f3a9c2e"


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(*extra: bytes) -> bytes:
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    idat = chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
    return PNG_SIGNATURE + ihdr + b"".join(extra) + idat + chunk(b"IEND", b"")


def test_a_pngs_text_chunks_and_anything_after_iend_are_dropped() -> None:
    texts = [
        chunk(b"tEXt", b"Comment\x00" + KEY.encode()),
        chunk(b"iTXt", b"prompt\x00\x00\x00\x00\x00" + KEY.encode()),
        chunk(b"zTXt", b"k\x00\x00" + zlib.compress(KEY.encode())),
    ]
    dirty = png(*texts) + b"trailing " + KEY.encode()
    clean = picture_only(dirty, "png")
    assert clean == png() and KEY.encode() not in clean
    assert picture_only(png(), "png") == png()  # a clean picture is unchanged, byte for byte


def test_a_jpegs_comment_and_exif_are_dropped_its_icc_profile_kept() -> None:
    def segment(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    jfif = segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    icc = segment(0xE2, b"ICC_PROFILE\x00\x01\x01profile")
    scan = segment(0xDA, b"\x00\x01\x02") + b"\x12\x34pixels\xff\xd9"
    dirty = (
        b"\xff\xd8" + jfif + segment(0xFE, KEY.encode()) + segment(0xE1, b"Exif\x00\x00" + KEY.encode()) + icc + scan
    )
    assert picture_only(dirty, "jpg") == b"\xff\xd8" + jfif + icc + scan


@pytest.mark.parametrize("broken", [png()[:-8], PNG_SIGNATURE + b"\x00\x00\xff\xffIDAT"], ids=["no IEND", "too long"])
def test_a_png_that_does_not_parse_is_no_picture(broken: bytes) -> None:
    with pytest.raises(InvalidAnswer):
        picture_only(broken, "png")
