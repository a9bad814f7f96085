"""The public surface of gptools as text: every public module, every name of its ``__all__``
with its signature, and each public class's public methods with theirs.

``tests/public_api.txt`` holds the listing; ``tests/test_public_api.py`` fails when the
package no longer matches it, so a change to the surface is a visible diff in review.
After an intended change, regenerate the file and commit it::

    .venv/bin/python -m tests.public_surface --write      # or: make public-api

The text is the same on every run: names, members and modules are sorted, defaults are
written by :func:`stable_repr` (no object addresses, sets sorted) and a class or function
is described once, in the deepest public module that exports it; the other modules that
export it name it (``Plan = gptools.campaigns.Plan``).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

import gptools

LISTING = Path(__file__).resolve().parent / "public_api.txt"
REGENERATE = "python -m tests.public_surface --write"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SCALARS = (type(None), bool, int, float, str, bytes, Decimal, timedelta)


def public_modules() -> list[str]:
    """Every module of the package whose dotted name has no part starting with ``_``."""
    names = ["gptools"]
    for info in pkgutil.walk_packages(gptools.__path__, "gptools."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def stable_repr(value: object) -> str:
    """A default value as the same text on every run: scalars and paths by ``repr``, enum
    members by name, containers element by element (sets sorted), anything else by its
    type (an object's ``repr`` may carry its address)."""
    if value is dataclasses.MISSING or type(value).__name__ == "_HAS_DEFAULT_FACTORY_CLASS":
        return "<factory>"  # dataclasses' marker of a default_factory
    if value is Ellipsis:
        return "..."
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, _SCALARS):
        return repr(value)
    if isinstance(value, PurePath):
        return f"{type(value).__name__}({str(value)!r})"
    if isinstance(value, tuple):
        inner = ", ".join(stable_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(stable_repr(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        inner = ", ".join(sorted(stable_repr(v) for v in value))
        return f"{type(value).__name__}({{{inner}}})"
    if isinstance(value, dict):
        items = sorted(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return f"<{type(value).__name__}>"


def _annotation(annotation: object) -> str:
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _ADDRESS.sub("", text)


def signature(obj: Any) -> str:
    """``obj``'s signature with stable defaults, or ``(...)`` when Python cannot read one."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    parts: list[str] = []
    for i, param in enumerate(params):
        before = params[i - 1].kind if i else None
        if param.kind is param.KEYWORD_ONLY and before not in (
            param.KEYWORD_ONLY,
            param.VAR_POSITIONAL,
        ):
            parts.append("*")
        text = param.name
        if param.kind is param.VAR_POSITIONAL:
            text = "*" + text
        elif param.kind is param.VAR_KEYWORD:
            text = "**" + text
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {stable_repr(param.default)}"
        parts.append(text)
        last_positional_only = param.kind is param.POSITIONAL_ONLY and (
            i + 1 == len(params) or params[i + 1].kind is not param.POSITIONAL_ONLY
        )
        if last_positional_only:
            parts.append("/")
    out = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty:
        out += f" -> {_annotation(sig.return_annotation)}"
    return out


def _ours(klass: type) -> bool:
    return klass.__module__ == "gptools" or klass.__module__.startswith("gptools.")


def _members(klass: type) -> Iterator[str]:
    """The public methods, properties and enum members of ``klass`` and of its gptools base
    classes (a base from elsewhere, pydantic's or Exception's, is its own library's
    surface)."""
    seen: dict[str, object] = {}
    for base in klass.__mro__:
        if not _ours(base):
            continue
        for name, value in vars(base).items():
            if not name.startswith("_") and name not in seen:
                seen[name] = value
    fields = getattr(klass, "__dataclass_fields__", {}) or getattr(klass, "model_fields", {})
    for name in sorted(seen):
        value = seen[name]
        if isinstance(klass, enum.EnumMeta) and isinstance(getattr(klass, name), klass):
            yield f"{name} = {stable_repr(getattr(klass, name).value)}"
        elif isinstance(value, property):
            yield f"property {name}"
        elif isinstance(value, (classmethod, staticmethod)):
            kind = "classmethod" if isinstance(value, classmethod) else "staticmethod"
            yield f"{kind} {name}{signature(getattr(klass, name))}"
        elif inspect.isfunction(value):
            prefix = "async def" if inspect.iscoroutinefunction(value) else "def"
            yield f"{prefix} {name}{signature(value)}"
        elif name in fields or isinstance(value, (type, ModuleType)):
            continue  # fields are in the constructor's signature
        elif callable(value):
            yield f"{name}{signature(value)}"
        else:
            yield f"{name}: {type(value).__name__}"


def _describe(name: str, obj: Any) -> list[str]:
    if isinstance(obj, type):
        bases = ", ".join(f"{b.__module__}.{b.__qualname__}" for b in obj.__bases__)
        head = [f"class {name}({bases})", f"    __init__{signature(obj)}"]
        return head + [f"    {m}" for m in _members(obj)]
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        prefix = "async def" if inspect.iscoroutinefunction(obj) else "def"
        return [f"{prefix} {name}{signature(obj)}"]
    if isinstance(obj, ModuleType):
        return [f"module {name}"]
    if isinstance(obj, (*_SCALARS, enum.Enum)):
        return [f"{name}: {type(obj).__name__} = {stable_repr(obj)}"]
    if callable(obj) and not hasattr(obj, "__len__"):
        return [f"{name}{signature(obj)}  # {type(obj).__name__}"]
    return [f"{name}: {type(obj).__name__}"]


def _homes(modules: dict[str, ModuleType]) -> dict[int, str]:
    """Where each exported class or function is described: the deepest public module that
    exports it, the first by name among equals."""
    homes: dict[int, str] = {}
    for module_name in sorted(modules, key=lambda m: (-m.count("."), m)):
        module = modules[module_name]
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if isinstance(obj, type) or inspect.isfunction(obj):
                homes.setdefault(id(obj), f"{module_name}.{name}")
    return homes


def surface() -> str:
    """The listing, as written to :data:`LISTING`."""
    modules = {m: importlib.import_module(m) for m in public_modules()}
    homes = _homes(modules)
    lines: list[str] = []
    for module_name in sorted(modules):
        module = modules[module_name]
        lines.append(f"## {module_name}")
        for name in sorted(getattr(module, "__all__", ())):
            if not hasattr(module, name):
                lines.append(f"{name}  # MISSING: named by __all__, not defined")
                continue
            obj = getattr(module, name)
            home = homes.get(id(obj))
            if home is not None and home != f"{module_name}.{name}":
                lines.append(f"{name} = {home}")
            else:
                lines.extend(_describe(name, obj))
        lines.append("")
    return "\n".join(_ADDRESS.sub("", line).rstrip() for line in lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {LISTING.name}")
    args = parser.parse_args(argv)
    text = surface()
    if args.write:
        LISTING.write_text(text, encoding="utf-8")
        print(f"wrote {LISTING} ({text.count(chr(10))} lines)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
