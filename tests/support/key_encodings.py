"""How a proxy, a gateway or a model may write a key it echoes: the forms a prober found stored (the tests of
the redactor and of every store write the key each of these ways)."""

from __future__ import annotations

import base64
import codecs
from collections.abc import Callable

KEY_FORMS: dict[str, Callable[[str], str]] = {
    "escaped_twice": lambda k: "".join(f"\\\\u{ord(c):04x}" for c in k),
    "escaped_three_times": lambda k: "".join(f"\\\\\\\\u{ord(c):04x}" for c in k),
    "percent_of_every_byte": lambda k: "".join(f"%{b:02X}" for b in k.encode()),
    "hex": lambda k: k.encode().hex(),
    "base32": lambda k: base64.b32encode(k.encode()).decode(),
    "base64_of_utf16": lambda k: base64.b64encode(k.encode("utf-16-le")).decode(),
    "fullwidth": lambda k: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in k),
    "entities": lambda k: "".join(f"&#{ord(c)};" for c in k),
    "nul_separated": lambda k: "\0".join(k),
    "zero_width_separated": lambda k: "\u200b".join(k),
    "soft_hyphen_separated": lambda k: "\u00ad".join(k),
    "space_separated": lambda k: " ".join(k),
    "reversed": lambda k: k[::-1],
    "rot13": lambda k: codecs.encode(k, "rot13"),
    "upper_cased": str.upper,
}
