"""Text that names tools, cut to the tools one request is offered.

Descriptions, schema descriptions and messages are written once, for a server offering every tool; a request
narrowed by toolsets or read-only must never read the name of a tool it cannot call, or a model follows the text
into a refusal. So text is not kept in a variant per narrowing: where it names an absent tool, the smallest piece
that does is left out, and what is left still reads as sentences:

1. a list of tool names (`a, b or c`) keeps the names that are offered;
2. a parenthesis naming one goes (`Repository id (list_repositories).` → `Repository id.`);
3. a clause after the first one of its sentence, between `,` `;` `:`, goes with its weaker separator
   (`The run takes minutes: follow it with get_agent_run, read its steps with get_agent_run_logs.` → `The run takes
   minutes: follow it with get_agent_run.`);
4. else the whole sentence goes.

Text that names no absent tool comes back unchanged, character for character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Final

from ..wording import listed
from .registry import all_tools

TOOL_NAMES: Final = frozenset(spec.name for spec in all_tools())
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")
_ABBREVIATIONS: Final = ("e.g.", "i.e.", "etc.", "cf.", "vs.")
_SEPARATORS: Final = {";": 2, ":": 3, ",": 1}  # a clause goes with the weaker of the separators around it
_NAME: Final = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"  # how a tool's name is spelt (and many an argument's)
_LIST: Final = re.compile(rf"\b{_NAME}(?:(?:,\s+|\s+(?:and|or)\s+|,\s+(?:and|or)\s+){_NAME})+\b")


def cut_to(text: str, offered: frozenset[str]) -> str:
    """`text` without the pieces that name a tool not in `offered` (see the module's rules)."""
    return _cut(text, TOOL_NAMES - offered)


def cut_schema(schema: Any, offered: frozenset[str]) -> Any:
    """A JSON schema whose every `description` is cut to the `offered` tools; the same object when none changes."""
    return _cut_schema(schema, TOOL_NAMES - offered)


def named_tools(text: str) -> set[str]:
    """The tools `text` names."""
    return set(_mention(TOOL_NAMES).findall(text))


def _names_any(text: str, names: Iterable[str]) -> bool:
    return _mention(frozenset(names)).search(text) is not None


def _cut_schema(schema: Any, absent: frozenset[str]) -> Any:
    if isinstance(schema, list):
        items = [_cut_schema(item, absent) for item in schema]
        return schema if all(new is old for new, old in zip(items, schema, strict=True)) else items
    if not isinstance(schema, dict):
        return schema
    out = {key: (_cut(value, absent) if key == "description" and isinstance(value, str) else _cut_schema(value, absent))
           for key, value in schema.items()}
    if out.get("description") == "":
        del out["description"]
    return schema if all(out.get(key) is value for key, value in schema.items()) and len(out) == len(schema) else out


@lru_cache(maxsize=4096)  # the same few descriptions, cut for the same few narrowings
def _cut(text: str, absent: frozenset[str]) -> str:
    if not absent or not _names_any(text, absent):
        return text
    pieces = _sentences(text)
    kept: list[str] = []
    for sentence, gap in pieces:
        if _names_any(sentence, absent):
            sentence = _cut_sentence(sentence, absent)
        if sentence:
            kept.append(sentence + gap)
    return "".join(kept).rstrip()


def _sentences(text: str) -> list[tuple[str, str]]:
    """The text as (sentence, the whitespace after it); a break after `e.g.` and the like is not a sentence's end."""
    out: list[tuple[str, str]] = []
    start = 0
    for found in _SENTENCE_END.finditer(text):
        before = text[start:found.start()]
        if before.split()[-1:] and before.split()[-1].lower() in _ABBREVIATIONS:
            continue
        out.append((before, found.group()))
        start = found.end()
    out.append((text[start:], ""))
    return out


def _cut_sentence(sentence: str, absent: frozenset[str]) -> str:
    offered_only = _shorter_lists(sentence, absent)
    if not _names_any(offered_only, absent):
        return offered_only
    without = _without_parentheses(offered_only, absent)
    if not _names_any(without, absent):
        return without
    end = without[-1] if without[-1:] in (".", "!", "?") else ""
    clauses = _clauses(without[:len(without) - len(end)])
    if _names_any(clauses[0], absent):
        return ""  # the sentence's own subject or verb names the tool: nothing of it stands alone
    while True:
        index = next((i for i in range(2, len(clauses), 2) if _names_any(clauses[i], absent)), None)
        if index is None:
            break
        after = clauses[index + 1] if index + 1 < len(clauses) else None
        # The clause goes with the weaker separator beside it: `a: b, c` without b reads `a: c`.
        if after is not None and _strength(after) < _strength(clauses[index - 1]):
            del clauses[index:index + 2]
        else:
            del clauses[index - 1:index + 1]
    return "".join(clauses).rstrip() + end


def _shorter_lists(text: str, absent: frozenset[str]) -> str:
    """A list of tools (`a, b or c`) keeps those offered (`a or c`); a list of absent tools alone is left for the
    clause rules, and a list that names anything but tools is left as it is."""
    def fitted(found: re.Match[str]) -> str:
        names = re.findall(_NAME, found.group())
        if not set(names) <= TOOL_NAMES or not set(names) & absent:
            return found.group()
        kept = [name for name in names if name not in absent]
        if not kept:
            return found.group()
        conjunction = "or" if re.search(r"\bor\b", found.group()) else "and"
        return listed(kept, conjunction)

    return _LIST.sub(fitted, text)


def _without_parentheses(text: str, absent: frozenset[str]) -> str:
    """Each parenthesis that names an absent tool left out, the innermost such first, with the space before it."""
    while True:
        naming = [(start, end) for start, end in _parentheses(text) if _names_any(text[start:end], absent)]
        if not naming:
            return text
        start, end = min(naming, key=lambda span: span[1] - span[0])
        start -= text[start - 1:start].isspace()
        text = text[:start] + text[end:]


def _parentheses(text: str) -> list[tuple[int, int]]:
    """The (start, end) of every balanced parenthesis of `text`, nested ones too."""
    spans, opened = [], []
    for index, char in enumerate(text):
        if char == "(":
            opened.append(index)
        elif char == ")" and opened:
            spans.append((opened.pop(), index + 1))
    return spans


def _clauses(text: str) -> list[str]:
    """`text` split at separators outside parentheses: [clause, separator, clause, separator, ...]."""
    out, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0 and char in _SEPARATORS and text[index + 1:index + 2].isspace():
            gap = len(text[index + 1:]) - len(text[index + 1:].lstrip())
            out += [text[start:index], text[index:index + 1 + gap]]
            start = index + 1 + gap
    out.append(text[start:])
    return out


def _strength(separator: str) -> int:
    return _SEPARATORS[separator[0]]


@lru_cache(maxsize=256)
def _mention(names: frozenset[str]) -> re.Pattern[str]:
    if not names:
        return re.compile(r"(?!)")
    return re.compile(rf"\b(?:{'|'.join(sorted(map(re.escape, names), key=len, reverse=True))})\b")
