"""A generated picture is stored as pixels only (an allowlist of what draws it: a PNG's critical and fixed-size
colour chunks, a JPEG's frame, tables and scan, a WebP's bitstream): it is served to every poller, and a proxy or
a model can write anything beside the pixels, in text chunks as in an ICC profile, a palette's name or a private
chunk."""

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


def test_a_pngs_other_chunks_are_dropped_its_colour_chunks_kept_when_their_size_is_right() -> None:
    """The key echoed into an ICC profile's name, a suggested palette's name, a private chunk: all dropped (they
    were stored byte for byte); gAMA, cHRM and sRGB are kept at their fixed size, dropped at another."""
    leaks = [
        chunk(b"iCCP", KEY.encode() + b"\x00\x00" + zlib.compress(b"profile")),
        chunk(b"sPLT", KEY.encode() + b"\x00\x08"),
        chunk(b"prVt", KEY.encode()),
        chunk(b"tIME", KEY.encode()[:7]),
        chunk(b"gAMA", KEY.encode()),  # the right type, the wrong size: it carries more than a gamma
    ]
    colours = [chunk(b"gAMA", struct.pack(">I", 45455)), chunk(b"sRGB", b"\x00"), chunk(b"cHRM", bytes(32))]
    clean = picture_only(png(*leaks, *colours), "png")
    assert clean == png(*colours) and KEY.encode() not in clean


def test_a_transparency_chunk_is_kept_only_at_its_colour_types_length() -> None:
    rgb_key = chunk(b"tRNS", b"\x00\x01\x00\x02\x00\x03")
    assert picture_only(png(rgb_key), "png") == png(rgb_key)  # one RGB colour transparent (colour type 2)
    assert picture_only(png(chunk(b"tRNS", KEY.encode())), "png") == png()


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def test_a_jpeg_keeps_its_frame_tables_and_scan_only() -> None:
    """Comment, Exif, an ICC profile (its tags are free text), a JFIF thumbnail: dropped."""
    jfif = segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    tables = segment(0xDB, bytes(65)) + segment(0xC0, bytes(15)) + segment(0xC4, bytes(20)) + segment(0xDD, b"\x00\x10")
    scan = segment(0xDA, b"\x00\x01\x02") + b"\x12\x34pixels\xff\xd9"
    leaks = [
        segment(0xFE, KEY.encode()),
        segment(0xE1, b"Exif\x00\x00" + KEY.encode()),
        segment(0xE2, b"ICC_PROFILE\x00\x01\x01" + KEY.encode()),
        segment(0xE0, b"JFXX\x00\x10" + KEY.encode()),
        segment(0xEB, KEY.encode()),
    ]
    dirty = b"\xff\xd8" + jfif + b"".join(leaks) + tables + scan
    assert picture_only(dirty, "jpg") == b"\xff\xd8" + jfif + tables + scan


def riff(*chunks: bytes) -> bytes:
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_chunk(kind: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(data)) + data + (b"\x00" if len(data) & 1 else b"")


def test_a_webp_keeps_its_bitstream_and_says_it_has_no_metadata() -> None:
    vp8x = webp_chunk(b"VP8X", bytes([0x20 | 0x08 | 0x04 | 0x10]) + bytes(9))  # ICC, EXIF, XMP and alpha flags
    pixels = webp_chunk(b"VP8L", b"\x2f" + bytes(20))
    dirty = riff(
        vp8x,
        webp_chunk(b"ICCP", KEY.encode()),
        pixels,
        webp_chunk(b"EXIF", KEY.encode()),
        webp_chunk(b"XMP ", KEY.encode()),
        webp_chunk(b"ZZZZ", KEY.encode()),
    )
    clean = picture_only(dirty, "webp")
    assert clean == riff(webp_chunk(b"VP8X", bytes([0x10]) + bytes(9)), pixels) and KEY.encode() not in clean
    assert picture_only(riff(pixels), "webp") == riff(pixels)  # a simple WebP is unchanged


@pytest.mark.parametrize("broken", [png()[:-8], PNG_SIGNATURE + b"\x00\x00\xff\xffIDAT"], ids=["no IEND", "too long"])
def test_a_png_that_does_not_parse_is_no_picture(broken: bytes) -> None:
    with pytest.raises(InvalidAnswer):
        picture_only(broken, "png")
