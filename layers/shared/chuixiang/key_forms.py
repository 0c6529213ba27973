"""The key in any form a reader could decode: canonical forms of a text, and the forms of a key to look for.

A proxy or gateway echoing a request may write the key escaped twice (a gateway wrapping an upstream's JSON error
in its own string), percent-encoded, as HTML entities, in fullwidth or mathematical letters, in UTF-16 (its NULs
between the characters), with zero-width characters or soft hyphens between them, upper-cased, reversed, in rot13,
hex, base32 or base64. Listing encodings one by one lets the next one through, so a text is *reduced* instead:

1. decoded to a fixed point: ``\\uXXXX`` and ``\\xXX`` escapes behind any number of backslashes, ``%XX``,
   ``&…;`` entities;
2. NFKC (fullwidth and mathematical letters fold back);
3. every control, format (zero-width, soft hyphen), separator character and the ASCII punctuation a key or an
   encoding uses to join its parts (``-_.:/+=~``) removed;
4. case-folded (the base64 forms, whose case is their content, are matched before this step).

A key is looked for as the same reduction of its own forms (it, reversed, rot13, hex, base32, base64 of its UTF-8
and UTF-16 at each alignment), by every run of :data:`PIECE` characters: a halved key is still a key.
"""

from __future__ import annotations

import base64
import codecs
import html
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote

#: The run of a key's (reduced) characters that counts as the key: shorter runs are ordinary text.
PIECE = 8
#: Decoding rounds before a text is taken as it is (a text escaped more deeply than this is not read by anyone).
MAX_DEPTH = 8
_ESCAPE = re.compile(r"\\+(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2}))")
#: What separates a key's characters without being read: controls (Cc), format characters (Cf: zero-width, soft
#: hyphen, bidi marks, BOM, tag characters…), surrogates (Cs), white space and separators (Z*, \s), and the
#: joiners a key or an encoding uses (``-_.:/+=~``). One regex: a 128 MB function has a fraction of a core, and
#: the text of a stream being written is read again every progress interval.
_REMOVED = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f\\s\\-_.:/+=~]+"
)


def decoded(text: str) -> str:
    """``text`` with escapes, ``%XX`` and entities decoded, again and again until nothing changes."""
    for _ in range(MAX_DEPTH):
        before = text
        if "\\" in text:
            text = _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
        if "%" in text:
            text = unquote(text, errors="replace")
        if "&" in text:
            text = html.unescape(text)
        if text == before:
            break
    return text


def reduced(text: str) -> str:
    """Step 1-3: decoded, NFKC, without what separates characters (case kept)."""
    return _REMOVED.sub("", unicodedata.normalize("NFKC", decoded(text)))


@dataclass(frozen=True)
class KeyPieces:
    """The pieces to look for: of the case-sensitive forms (base64), and of every other form, case-folded."""

    cased: frozenset[str]
    folded: frozenset[str]

    def found_in(self, text: str) -> bool:
        """Whether ``text``, reduced, holds a piece of the key in any of its forms."""
        if not text:
            return False
        cased = reduced(text)
        return _holds(cased, self.cased) or _holds(cased.casefold(), self.folded)


def _holds(text: str, pieces: frozenset[str]) -> bool:
    return bool(pieces) and any(text[i : i + PIECE] in pieces for i in range(len(text) - PIECE + 1))


def _pieces(form: str) -> set[str]:
    return {form[i : i + PIECE] for i in range(len(form) - PIECE + 1)}


def base64_forms(raw: bytes) -> set[str]:
    """``raw`` in base64 (standard and URL-safe) at each of the three alignments it can have inside a longer
    base64 text: the characters its bytes alone decide."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        middle = encoded[4 if offset else 0 : (offset + len(raw)) // 3 * 4]
        forms |= {middle, middle.replace("+", "-").replace("/", "_")}
    return forms


def key_pieces(*keys: str) -> KeyPieces:
    """The pieces of every form of ``keys``."""
    cased: set[str] = set()
    folded: set[str] = set()
    for key in keys:
        raw = key.encode()
        for form in (
            *base64_forms(raw),
            *base64_forms(key.encode("utf-16-le")),
            *base64_forms(key.encode("utf-16-be")),
        ):
            cased |= _pieces(reduced(form))
        plain = (key, key[::-1], codecs.encode(key, "rot13"), raw.hex(), base64.b32encode(raw).decode().rstrip("="))
        for form in plain:
            folded |= _pieces(reduced(form).casefold())
    return KeyPieces(frozenset(cased), frozenset(folded))
