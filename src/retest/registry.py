"""One generic registry for every pluggable kind (sources, samplers, metrics, ...).

Unknown names fail with :class:`~retest.errors.UnknownNameError` listing close
matches, so a typo on the command line gets a "did you mean" answer.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from types import ModuleType
from typing import Generic, TypeVar

from retest.errors import ConfigError, UnknownNameError

__all__ = ["Registry", "close_matches"]

T = TypeVar("T")


def close_matches(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``names`` close to ``name`` (the one "did you mean" rule)."""
    return difflib.get_close_matches(name, list(names), n=n, cutoff=0.6)


def _natural_key(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


class Registry(Generic[T]):
    """A name → object mapping with decorator registration and suggestions.

    Parameters
    ----------
    kind : str
        What the entries are, used in messages ("sampler", "model", ...).
    entry_point_group : str, optional
        ``importlib.metadata`` group scanned once for plugins.

    Examples
    --------
    >>> from retest import Registry
    >>> REG = Registry[int]("number")
    >>> @REG.register("one")
    ... def one():
    ...     return 1
    >>> REG.get("one")()
    1
    >>> REG.get("onw")
    Traceback (most recent call last):
    ...
    retest.errors.UnknownNameError: Unknown number 'onw'. Did you mean 'one'?
    """

    def __init__(self, kind: str, *, entry_point_group: str | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._group = entry_point_group
        self._plugins_loaded = entry_point_group is None

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """Decorator that stores the decorated object under ``name``."""

        def deco(obj: T) -> T:
            self.add(name, obj, replace=replace)
            return obj

        return deco

    def add(self, name: str, obj: T, *, replace: bool = False) -> None:
        """Store ``obj`` under ``name``; a duplicate needs ``replace=True``."""
        if name in self._entries and not replace:
            raise ConfigError(
                f"{self.kind} {name!r} is already registered. "
                "Pass replace=True to overwrite it."
            )
        self._entries[name] = obj

    def _load_plugins(self) -> None:
        """Load the entry points of the group, once.

        An entry point names either the object (``pkg.mod:obj``, stored under the
        entry point's name) or the module (``pkg.mod``) whose import registers
        its entries itself, as a module of built-ins does.
        """
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        assert self._group is not None
        for ep in entry_points(group=self._group):
            if ep.name in self._entries:
                continue
            try:
                obj = ep.load()
            except Exception as err:
                raise ConfigError(
                    f"{self.kind} plug-in {ep.name!r} (entry point {ep.value!r} in "
                    f"group {self._group}) failed to load: {type(err).__name__}: "
                    f"{err}. Fix or uninstall the package that provides it."
                ) from err
            if not isinstance(obj, ModuleType) and ep.name not in self._entries:
                self._entries[ep.name] = obj

    def get(self, name: str) -> T:
        """Return the entry called ``name`` or raise with suggestions."""
        self._load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            names = self.names()
            close = close_matches(name, names)
            raise UnknownNameError(self.kind, name, close, names) from None

    def names(self, pattern: str = "*") -> list[str]:
        """Registered names matching a shell-style ``pattern``, naturally sorted."""
        self._load_plugins()
        return sorted(
            (n for n in self._entries if fnmatch.fnmatchcase(n, pattern)),
            key=_natural_key,
        )

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load_plugins()
        return len(self._entries)
