"""Text the service returns, made safe to show: no invisible or bidirectional controls, and short when quoted.

Such text may come from a third party (a trace, a pull-request title, a repository name, an error body), so
it is never trusted to look like what it is: controls that hide or reorder characters are removed, and where
it is quoted inside our own words it is cut to a short excerpt.
"""

from __future__ import annotations

import re
from typing import Any, Final

# C0/C1 controls (but tab and line breaks), soft hyphen, Arabic letter mark, Mongolian vowel separator,
# zero-width and directional marks, bidi embeddings/overrides/isolates, invisible operators, BOM, tags.
_HIDDEN: Final = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff"
    "\ufff9-\ufffb\U000e0000-\U000e007f]")
# The escapes `json.dumps` writes for the C0 controls among those (`\b`, `\f`, `\u00XX`); an escaped backslash before
# b, f or u00 matches too: then a tree is walked for nothing, never the other way round.
_ESCAPED_CONTROL: Final = re.compile(r"\\(?:[bf]|u00[01])")
EXCERPT_CHARS: Final = 200


def visible(text: str) -> str:
    """The text without characters that are invisible or reorder what a reader sees."""
    if text.isascii() and text.isprintable():  # nothing can hide in printable ASCII: most of what a result holds
        return text
    return _HIDDEN.sub("", text)


def visible_tree(value: dict[str, Any]) -> dict[str, Any]:
    """`visible` applied to every string (keys too) of a decoded JSON object."""
    return {visible(key): _visible_value(item) for key, item in value.items()}


def _visible_value(value: Any) -> Any:
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return visible_tree(value)
    if isinstance(value, list):
        return [_visible_value(item) for item in value]
    return value


def hides_nothing(json_text: str) -> bool:
    """Whether JSON text (`json.dumps`, ensure_ascii=False) decodes to strings that are all visible already: a scan
    of the text, a fraction of what `visible_tree` costs walking the decoded value. In ASCII text `json.dumps`
    leaves only DEL of those characters unescaped."""
    raw = "\x7f" in json_text if json_text.isascii() else _HIDDEN.search(json_text) is not None
    return not raw and _ESCAPED_CONTROL.search(json_text) is None


def excerpt(text: str, secret: str, max_chars: int = EXCERPT_CHARS) -> str:
    """A short, single-line, visible excerpt, marked when cut; `secret` is redacted before cutting, so no part
    of it survives a cut through it."""
    flat = " ".join(visible(redact(text, secret)).split())
    return flat if len(flat) <= max_chars else f"{flat[:max_chars]}…"


def redact(value: Any, secret: str) -> Any:
    """Every occurrence of `secret` replaced, in strings nested anywhere (a service may echo the token back)."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, "[redacted]")
    if isinstance(value, dict):
        return {redact(key, secret): redact(item, secret) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item, secret) for item in value]
    return value
