"""Reading a few members of a JSON object from its bytes without building the rest: a bounded parser.

`json.loads` builds every value of a body: a megabyte of empty objects (`[{},{},...]`) is a quarter of a million
dicts, 25 times its size. What the gate and the access line need of a JSON-RPC message is a handful of short
members, so this walks an object's members and skips every value it is not asked for, in regular expressions
wherever it can: a string or a scalar in one match, a run of members not asked for in one match, a container's
contents nested at most `FLAT_DEPTH` deep in one match, and deeper ones a step per run of brackets. Nothing is built
but the values asked for, each decoded on its own (`text`), so reading a body costs no more memory than the body.

The MCP SDK still parses the body whole, once, and is the judge of whether it is JSON: this is no validator (a
container's inside is skipped unchecked). What it reads of a valid body is what the SDK reads: a member named with
escapes (`"met\\u0068od"`) is decoded before it is compared, and a repeated member comes again (the last counts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Final, NamedTuple

FLAT_DEPTH: Final = 3  # containers nested this deep are skipped in one match; deeper ones cost a step per bracket run
_OPEN: Final = frozenset(b"[{")
_CLOSE: Final = frozenset(b"]}")
_QUOTE: Final = ord('"')

_SPACE: Final = rb"[ \t\n\r]*+"
_STRING: Final = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_SCALAR: Final = rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?+|true|false|null"
_PLAIN: Final = rb'[^\[\]{}"]++'  # anything inside a container but a bracket or a string


def _flat(depth: int) -> bytes:
    """A container holding nothing nested deeper than `depth` (1: no container at all)."""
    inner = _PLAIN + b"|" + _STRING + (b"|" + _flat(depth - 1) if depth > 1 else b"")
    return rb"[\[{](?:" + inner + rb")*+[\]}]"


# Possessive throughout: no alternative can start where another does, so nothing is ever tried twice.
_WHITESPACE: Final = re.compile(_SPACE)
_STRING_TOKEN: Final = re.compile(_STRING, re.S)
_SCALAR_TOKEN: Final = re.compile(_SCALAR)
_RUN: Final = re.compile(rb"(?:" + _PLAIN + b"|" + _STRING + b"|" + _flat(FLAT_DEPTH) + rb")*+", re.S)
_OPENS: Final = re.compile(rb"[\[{]++")
_CLOSES: Final = re.compile(rb"(?:[\]}]" + _SPACE + rb")++")


class Unreadable(ValueError):
    """The bytes are not JSON as far as they were read."""


class TooIntricate(Unreadable):
    """More containers nested past what a match takes in, or members with escaped names, than `Scan` takes steps."""


class Member(NamedTuple):
    """A member asked for: its key, and where its value lies in the body."""

    key: str
    start: int
    end: int


@cache
def _passing(keys: frozenset[str]) -> re.Pattern[bytes]:
    """A run of members none of `keys` names, each followed by a comma and holding a value skipped in one match; a
    name written with an escape is never passed (it may spell one of `keys`)."""
    names = b"|".join(re.escape(json.dumps(key).encode()) for key in sorted(keys))
    value = b"(?:" + _SCALAR + b"|" + _STRING + b"|" + _flat(FLAT_DEPTH) + b")"
    member = rb'(?!' + names + rb'|"[^"\\]*+\\)' + _STRING + _SPACE + b":" + _SPACE + value + _SPACE + b"," + _SPACE
    return re.compile(b"(?:" + member + b")*+", re.S)


def _end(pattern: re.Pattern[bytes], body: bytes, at: int) -> int:
    """Where `pattern`, which matches the empty string, ends from `at`."""
    match = pattern.match(body, at)
    assert match is not None
    return match.end()


class Scan:
    """One body, read at most `max_steps` steps in Python (each a member handled on its own, or a run of brackets);
    past them `TooIntricate`, so what a body costs in time is bounded too."""

    def __init__(self, body: bytes, max_steps: int) -> None:
        self.body = body
        self.steps_left = max_steps

    def start(self) -> int:
        """Where the body's value starts, past any whitespace (the body's length when there is none)."""
        return _end(_WHITESPACE, self.body, 0)

    def value_end(self, at: int) -> int:
        """Where the value starting at `at` ends."""
        first = self._byte(at)
        if first in _OPEN:
            return self._container_end(at)
        match = (_STRING_TOKEN if first == _QUOTE else _SCALAR_TOKEN).match(self.body, at)
        if match is None:
            raise Unreadable(f"no JSON value at byte {at}")
        return match.end()

    def members(self, at: int, keys: frozenset[str]) -> Iterator[Member]:
        """The members named by `keys` of the object starting at `at`, in order (a repeated key comes again)."""
        body = self.body
        if self._byte(at) != ord("{"):
            raise Unreadable(f"no object at byte {at}")
        passing = _passing(keys)
        longest = 6 * max(map(len, keys)) + 2  # longer is none of `keys`, each of its characters escaped (\\uXXXX)
        at = _end(_WHITESPACE, body, at + 1)
        if self._byte(at) == ord("}"):
            return
        while True:
            self._step()
            at = _end(passing, body, at)
            if self._byte(at) != _QUOTE:
                raise Unreadable(f"no member name at byte {at}")
            key_end = self.value_end(at)
            key = text(body, at, key_end) if key_end - at <= longest else None
            at = _end(_WHITESPACE, body, key_end)
            if self._byte(at) != ord(":"):
                raise Unreadable(f"no ':' at byte {at}")
            start = _end(_WHITESPACE, body, at + 1)
            end = self.value_end(start)
            if key in keys:
                yield Member(key, start, end)
            at = _end(_WHITESPACE, body, end)
            separator = self._byte(at)
            if separator == ord("}"):
                return
            if separator != ord(","):
                raise Unreadable(f"no ',' or '}}' at byte {at}")
            at = _end(_WHITESPACE, body, at + 1)

    def _container_end(self, at: int) -> int:
        """Where the container starting at `at` ends: a step per run of brackets that opens or closes something
        nested deeper than a match takes in."""
        body, depth = self.body, 0
        while True:
            self._step()
            first = self._byte(at)
            if first in _OPEN:  # all but the innermost FLAT_DEPTH of a run, which `_RUN` may take in at once
                opened = max(1, _end(_OPENS, body, at) - at - FLAT_DEPTH)
                depth += opened
                at += opened
            elif first in _CLOSE:
                run = _end(_CLOSES, body, at)
                closed = run - at - _spaces(body[at:run])
                if closed >= depth:
                    return _after_closing(body, at, depth)
                depth -= closed
                at = run
            else:  # a quote that starts no whole string
                raise Unreadable(f"an unterminated string at byte {at}")
            at = _end(_RUN, body, at)

    def _byte(self, at: int) -> int:
        if at >= len(self.body):
            raise Unreadable("the JSON ends early")
        return self.body[at]

    def _step(self) -> None:
        self.steps_left -= 1
        if self.steps_left < 0:
            raise TooIntricate("too many nested containers or members to read")


def _spaces(run: bytes) -> int:
    return len(run) - len(run.translate(None, b" \t\n\r"))


def _after_closing(body: bytes, at: int, count: int) -> int:
    """Just past the `count`th closing bracket from `at` (a run of them, whitespace between)."""
    for index in range(at, len(body)):
        if body[index] in _CLOSE:
            count -= 1
            if count == 0:
                return index + 1
    raise Unreadable("the JSON ends early")


def text(body: bytes, start: int, end: int) -> str | None:
    """The string value at `body[start:end]`, decoded; None when the value is no string."""
    if body[start] != _QUOTE:
        return None
    try:
        decoded = json.loads(body[start:end])
    except ValueError:  # a bad escape, or bytes that are not UTF-8
        raise Unreadable(f"an unreadable string at byte {start}") from None
    assert isinstance(decoded, str)
    return decoded

