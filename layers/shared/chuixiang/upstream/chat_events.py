"""What one event of a chat answer says: its text and reasoning (in every dialect's shape), its usage, an error
it carries; and a redacted snippet of what an upstream sent, for a failure's detail."""

from __future__ import annotations

import json
from typing import Any

from ..redaction import redact, redact_bytes, redact_tree


def first_candidate(choices: Any) -> dict[str, Any] | None:
    """The answer's choice: candidate 0 (``index`` 0, or no index as some gateways send). A stream of several
    candidates (``n`` > 1) interleaves their chunks: the others are not this answer's text."""
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) in (0, None):
            return choice
    return None


def error_in(event: dict[str, Any]) -> Any:
    """What says this chunk (or document) is an error, in each dialect: OpenAI's ``{"error": …}`` (also with
    choices, as OpenRouter sends it mid-stream), vLLM's ``{"object": "error", "message": …}``, MiniMax's
    ``base_resp`` with a non-zero ``status_code`` (its errors come with HTTP 200)."""
    if event.get("error"):
        return event["error"]
    if event.get("object") == "error":
        return event
    base = event.get("base_resp")
    if isinstance(base, dict) and base.get("status_code") not in (None, 0, "0"):
        return base
    return None


def cached_prompt_tokens(usage: dict[str, Any] | None) -> int | None:
    """The prompt tokens a provider's prefix cache held (billed at a fraction): OpenAI's and most others'
    ``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``; None when not said."""
    if not usage:
        return None
    details = usage.get("prompt_tokens_details")
    found = token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return found if found is not None else token_count(usage.get("prompt_cache_hit_tokens"))


def token_count(value: Any) -> int | None:
    """A provider's token count, or ``None`` for anything that is not one (a string, a bool, a negative)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def snippet(value: Any) -> str:
    """The start of something an upstream sent, for a failure's detail: decoded, then redacted, then formatted
    (never a ``repr`` redacted) and cut last, so a key the cut would halve is still recognised whole."""
    if isinstance(value, bytes | bytearray):
        return repr(redact_bytes(bytes(value[:4096])))[:200]
    if isinstance(value, str):
        return redact(value)[:300]
    try:
        return json.dumps(redact_tree(value), ensure_ascii=False)[:300]
    except (TypeError, ValueError):
        return redact(str(value))[:300]


def usage_of(event: dict[str, Any], choice: dict[str, Any] | None) -> dict[str, Any] | None:
    """Token usage: top level (OpenAI), inside the choice (Moonshot), or a provider's extension (Groq's ``x_groq``)."""
    for holder in (event, choice, event.get("x_groq")):
        if isinstance(holder, dict):
            usage = holder.get("usage")
            if isinstance(usage, dict) and usage:
                return usage
    return None


def texts_of(delta: dict[str, Any]) -> tuple[str, str]:
    """(content, reasoning) of a delta or message: content as a string or a list of typed parts
    (text parts are content, thinking/reasoning parts are reasoning); reasoning as ``reasoning_content``
    (DeepSeek, Qwen) or ``reasoning`` (OpenRouter, vLLM)."""
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    reasoning = reasoning if isinstance(reasoning, str) else ""
    if isinstance(content, str):
        return content, reasoning
    if isinstance(content, list):
        text, thought = _parts(content)
        return text, reasoning + thought
    return "", reasoning


_REASONING_PARTS = frozenset({"thinking", "reasoning", "reasoning_text"})


def _parts(parts: list[Any]) -> tuple[str, str]:
    text: list[str] = []
    thought: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in _REASONING_PARTS:
                thought.append(_flatten(part.get(kind) if kind in part else part.get("text")))
            elif kind in (None, "text", "output_text") and isinstance(part.get("text"), str):
                text.append(part["text"])
    return "".join(text), "".join(thought)


def _flatten(value: Any) -> str:
    """The text of a reasoning part: a string, or a list of text parts (Mistral's ``thinking``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_flatten(v.get("text") if isinstance(v, dict) else v) for v in value)
    return ""
