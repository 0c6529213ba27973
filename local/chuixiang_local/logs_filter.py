"""CloudWatch Logs filter patterns (``filter-log-events --filter-pattern``), run over a local functions log, so a
runbook pattern that matches nothing (a field no function logs, an OR written as an AND) fails a test.

The subset the runbook uses, as the CloudWatch Logs user guide's *Filter pattern syntax* describes it:

* unstructured terms, case-sensitive: ``ERROR`` (the message contains the word), ``"Task timed out"`` (an exact
  phrase; non-alphanumeric terms are quoted), several terms (all must match), ``?a ?b`` (any of the ``?`` terms),
  ``-a`` (must not match);
* JSON patterns on a JSON event: ``{ $.field = "value" }`` with ``=``/``!=`` on strings (``*`` a wildcard) and
  numbers, ``<``, ``<=``, ``>``, ``>=`` on numbers, ``&&``, ``||`` and parentheses; a non-JSON event never matches.

Anything else (space-delimited ``[...]`` patterns, ``%regex%``, ``IS NULL``, ``EXISTS``) raises
:class:`UnsupportedPattern`: never matched by a guess.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable
from typing import Any

Matcher = Callable[[str], bool]
_TERM = re.compile(r'\s*([?-]?)("(?:[^"\\]|\\.)*"|[^\s"]+)')
_JSON_TOKEN = re.compile(
    r'\s*(\$(?:\.[\w@-]+|\[\d+\])+|"(?:[^"\\]|\\.)*"|&&|\|\||!=|<=|>=|=|<|>|\(|\)|[^\s()"=!<>&|]+)'
)
_NUMERIC = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class UnsupportedPattern(ValueError):
    """A pattern outside the modelled subset."""


def matcher(pattern: str) -> Matcher:
    """The pattern as a test of one event's message."""
    text = pattern.strip()
    if text.startswith("{"):
        if not text.endswith("}"):
            raise UnsupportedPattern(f"a JSON pattern without its closing brace: {pattern!r}")
        return _json_matcher(text[1:-1])
    if text.startswith(("[", "%")):
        raise UnsupportedPattern(f"space-delimited and regex patterns are not modelled: {pattern!r}")
    return _terms_matcher(text)


def matching(pattern: str, messages: Iterable[str]) -> list[str]:
    test = matcher(pattern)
    return [m for m in messages if test(m)]


def _terms_matcher(text: str) -> Matcher:
    required: list[str] = []
    optional: list[str] = []
    excluded: list[str] = []
    position = 0
    while position < len(text):
        found = _TERM.match(text, position)
        if found is None:
            raise UnsupportedPattern(f"cannot read the terms of {text!r}")
        sign, term = found.groups()
        word = json.loads(term) if term.startswith('"') else term
        {"?": optional, "-": excluded, "": required}[sign].append(word)
        position = found.end()
        while position < len(text) and text[position].isspace():
            position += 1

    def test(message: str) -> bool:
        if any(word in message for word in excluded) or not all(word in message for word in required):
            return False
        return not optional or any(word in message for word in optional)

    return test


class _JsonParser:
    """``expr := term (('&&' | '||') term)*``, ``&&`` binding tighter; ``term := '(' expr ')' | $.sel op value``."""

    def __init__(self, body: str) -> None:
        self.tokens = _tokens(body)
        self.i = 0

    def parse(self) -> Callable[[Any], bool]:
        test = self._or()
        if self.i != len(self.tokens):
            raise UnsupportedPattern(f"unexpected {self.tokens[self.i]!r} in a JSON pattern")
        return test

    def _next(self) -> str:
        if self.i >= len(self.tokens):
            raise UnsupportedPattern("a JSON pattern ends too early")
        self.i += 1
        return self.tokens[self.i - 1]

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _or(self) -> Callable[[Any], bool]:
        parts = self._joined("||", self._and)
        return lambda doc: any(p(doc) for p in parts)

    def _and(self) -> Callable[[Any], bool]:
        parts = self._joined("&&", self._term)
        return lambda doc: all(p(doc) for p in parts)

    def _joined(self, sign: str, operand: Callable[[], Callable[[Any], bool]]) -> list[Callable[[Any], bool]]:
        """``operand (sign operand)*``: the operands read."""
        parts = [operand()]
        while self._peek() == sign:
            self._next()
            parts.append(operand())
        return parts

    def _term(self) -> Callable[[Any], bool]:
        word = self._next()
        if word == "(":
            inner = self._or()
            if self._next() != ")":
                raise UnsupportedPattern("an unclosed parenthesis in a JSON pattern")
            return inner
        if not word.startswith("$"):
            raise UnsupportedPattern(f"a JSON pattern's term starts with a selector ($.field), not {word!r}")
        return _comparison(word, self._next(), self._next())


def _tokens(body: str) -> list[str]:
    tokens, position = [], 0
    while body[position:].strip():
        found = _JSON_TOKEN.match(body, position)
        if found is None:
            raise UnsupportedPattern(f"cannot read {body[position:]!r}")
        tokens.append(found.group(1))
        position = found.end()
    return tokens


def _comparison(selector: str, op: str, raw: str) -> Callable[[Any], bool]:
    path = re.findall(r"\.([\w@-]+)|\[(\d+)\]", selector)
    if raw.upper() in ("NULL", "TRUE", "FALSE") or op not in ("=", "!=", *_NUMERIC):
        raise UnsupportedPattern(f"not modelled: {selector} {op} {raw}")
    value: str | float = json.loads(raw) if raw.startswith('"') else raw
    if op in _NUMERIC or not raw.startswith('"'):
        try:
            value = float(raw)
        except ValueError:
            if op in _NUMERIC:
                raise UnsupportedPattern(f"{op} compares numbers, not {raw!r}") from None

    def test(doc: Any) -> bool:
        found = _select(doc, path)
        if found is _MISSING:
            return False
        if isinstance(value, float):
            if isinstance(found, bool) or not isinstance(found, int | float):
                return op == "!="
            return _NUMERIC[op](found, value) if op in _NUMERIC else (found == value) == (op == "=")
        hit = isinstance(found, str) and _wildcard(value).fullmatch(found) is not None
        return hit == (op == "=")

    return test


_MISSING = object()


def _select(doc: Any, path: list[tuple[str, str]]) -> Any:
    for key, index in path:
        if key and isinstance(doc, dict) and key in doc:
            doc = doc[key]
        elif index and isinstance(doc, list) and int(index) < len(doc):
            doc = doc[int(index)]
        else:
            return _MISSING
    return doc


def _wildcard(value: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in value.split("*")), re.S)


def _json_matcher(body: str) -> Matcher:
    test = _JsonParser(body).parse()

    def on_message(message: str) -> bool:
        try:
            doc = json.loads(message)
        except ValueError:
            return False
        return isinstance(doc, dict) and test(doc)

    return on_message
