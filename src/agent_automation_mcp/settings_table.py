"""What a setting is, declared once: a row of a settings class's table (`ApiSettings`, `config.py`'s), from which
its variables are read, its flag is made and `--help` and the docs' checks derive.

Adding a setting adds a field to its settings class, a row to that class's table and one to docs/configuration.md's
(tests/test_settings_table.py names a missing one); nothing else restates it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Parse = Callable[[str | None, str], Any]
"""A setting's text to its value, given the variable it came from (None for a flag: argparse names the flag);
a `ValueError` says what is wrong, naming the variable."""


def text(name: str | None, value: str) -> str:
    return value


def plain(parse: Callable[[str], Any]) -> Parse:
    """A parser whose errors name the setting themselves."""
    return lambda name, value: parse(value)


@dataclass(frozen=True, slots=True)
class Number:
    """A whole number, or a number of seconds, of at least `minimum`: a bad value is refused with the setting's
    name, not a bare conversion error."""

    kind: type[int] | type[float]
    minimum: float

    def __call__(self, name: str | None, value: str) -> Any:
        try:
            number = self.kind(value)
        except ValueError:
            number = None
        if number is not None and number >= self.minimum:
            return number
        if name is None:
            what = "a whole number" if self.kind is int else "a number of seconds"
            raise ValueError(f"{what} >= {self.minimum:g}, got {value!r}")
        raise ValueError(f"{name} must be {'an integer' if self.kind is int else 'a number'} >= {self.minimum:g}, "
                         f"got {value!r}")


@dataclass(frozen=True, slots=True)
class Choice:
    """One of `choices`, in any case; the value is the choice as it is spelt there."""

    choices: tuple[str, ...]

    def __call__(self, name: str | None, value: str) -> str:
        for choice in self.choices:
            if value.lower() == choice.lower():
                return choice
        raise ValueError(f"{f'{name} must be ' if name else ''}one of {', '.join(self.choices)}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: the settings field it sets, the variables and the flag it is read from, how its text is read,
    and what `--help` says of it. Its default is the settings class's own, and `--help` says it."""

    field: str
    env: tuple[str, ...] = ()  # ours first, then the service's own tools' names, read when ours are unset
    parse: Parse = text
    flag: str | None = None
    help: str = ""  # what the flag sets; `--help` adds the default and the variable
    note: str | None = None  # what `--help` says of the default, where its value alone would not say it
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    repeatable: bool = False  # the flag may be given again: its values are joined with commas, as the variable's
    switch: bool = False  # a flag without a value, that turns the setting on


def read_env(table: Sequence[Setting], env: Mapping[str, str]) -> dict[str, Any]:
    """The fields that `env` sets, parsed; a field it leaves unset (or blank) keeps the settings class's default."""
    values: dict[str, Any] = {}
    for setting in table:
        for name in setting.env:
            value = env.get(name, "").strip()
            if value:
                values[setting.field] = setting.parse(name, value)
                break
    return values
