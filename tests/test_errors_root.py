"""One exception root: every exception class gptools defines derives from GptoolsError."""

from __future__ import annotations

import ast
import builtins
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gptools
from gptools.errors import ConfigurationError, GptoolsError

PACKAGE = Path(gptools.__file__).resolve().parent

#: Exception classes that stay outside the root, by class name (wherever they live), each for
#: a reason written here. LoadInterrupted reports a Ctrl-C: it is a KeyboardInterrupt, and
#: deriving it from Exception (as GptoolsError is) would let every ``except Exception``
#: swallow it; it is the documented one (errors.py draws it). _Terminated carries a SIGTERM
#: out of uvicorn to the receiver's clean-up, for the same reason a BaseException; it is
#: private and never leaves ``gptools webhooks serve``.
OUTSIDE_THE_ROOT = {"LoadInterrupted", "_Terminated"}

#: Public-named exception classes no public module exports, because none reaches a caller:
#: the sandbox turns Refusal and CampaignNotPlayableError into HTTP answers, the command
#: line turns its five classes into exit codes, and the receiver catches CommitUncertain
#: (it asks the store what happened), HandlerTimeout (it records the failure, then retries
#: the action or dead-letters it), NotDurable (it answers 503) and SpoolMoved (another
#: process replays that spool file).
STAYS_INSIDE = {
    "Refusal",
    "CampaignNotPlayableError",
    "BadInput",
    "Failure",
    "AddressInUse",
    "Interrupted",
    "NotRecorded",
    "CommitUncertain",
    "NotDurable",
    "SpoolMoved",
    "HandlerTimeout",
}

#: A line of the drawing: the tree's lines, then a class name (its column gives its depth).
_NODE = re.compile(r"^[ │├└─]*(?P<name>[A-Z]\w+)(?:\s|$)")


def _every_module() -> list[str]:
    """Import every module of the package (an import error fails the test)."""
    names = []
    for info in pkgutil.walk_packages(gptools.__path__, "gptools."):
        importlib.import_module(info.name)
        names.append(info.name)
    return names


def _subclasses(klass: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    todo = [klass]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _ours() -> dict[str, type[BaseException]]:
    """Every exception class defined in gptools, by qualified name, once every module is
    imported (classes nested in other classes included)."""
    modules = _every_module()
    assert len(modules) > 50 and "gptools.sandbox._refusal" in modules
    return {
        f"{k.__module__}.{k.__qualname__}": k
        for k in _subclasses(BaseException)
        if k.__module__ == "gptools" or k.__module__.startswith("gptools.")
    }


def test_every_exception_class_of_the_package_derives_from_gptools_error() -> None:
    ours = _ours()
    # The walk reached every layer, the sandbox and the CLI included.
    for name in (
        "gptools.webhooks._records.StoreError",
        "gptools.webhooks._credentials.AuthConfigError",
        "gptools.sandbox._refusal.Refusal",
        "gptools.participants._loader.LoadStopped",
        "gptools.participants._journal.JournalBusyError",
        "gptools.cli._main.BadInput",
        "gptools.notebook_html.WidgetManagerUnavailable",
    ):
        assert name in ours
    outside = sorted(k.__name__ for k in ours.values() if not issubclass(k, GptoolsError))
    assert outside == sorted(OUTSIDE_THE_ROOT), (
        f"exception classes that do not derive from gptools.errors.GptoolsError: {outside}"
    )


def test_the_one_class_outside_the_root_is_still_an_interrupt() -> None:
    from gptools.participants import LoadInterrupted

    assert issubclass(LoadInterrupted, KeyboardInterrupt)
    assert not issubclass(LoadInterrupted, Exception)


def test_no_exception_class_hides_where_the_walk_cannot_see_it() -> None:
    """A class defined inside a function exists only once the function runs: every class
    statement whose bases name an exception must be one the walk found."""
    seen = {k.__name__ for k in _ours().values()}
    hidden = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ClassDef)
                and node.name not in seen
                and any(
                    word in ast.unparse(base)
                    for base in node.bases
                    for word in ("Error", "Exception", "Interrupt", "Refusal", "Timeout")
                )
            ):
                hidden.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert not hidden, f"exception classes the module walk did not find: {hidden}"


@pytest.mark.parametrize(
    "name",
    [
        "gptools.webhooks._credentials.AuthConfigError",
        "gptools.sandbox._persist.SandboxStateError",
        "gptools.participants._sources.PlayerListError",
        "gptools.participants._journal.JournalBusyError",
        "gptools.campaigns._plan.PlanFileError",
        "gptools.campaigns._validate.PlanInvalidError",
        "gptools.costs._money.UnknownCurrencyError",
        "gptools.costs._tables.StoredTableError",
        "gptools.deliverylog._contract.DeliveryLogError",
    ],
)
def test_what_was_a_value_error_still_is_one(name: str) -> None:
    """``except ValueError`` callers keep working."""
    assert issubclass(_ours()[name], ValueError)


def test_settings_errors_are_configuration_errors() -> None:
    from gptools.webhooks import AuthConfigError, ReceiverAuth

    assert issubclass(AuthConfigError, ConfigurationError)
    with pytest.raises(ConfigurationError, match="BEARER authentication needs an API key"):
        ReceiverAuth("BEARER")


def test_store_errors_are_gptools_errors(tmp_path: Path) -> None:
    from gptools.webhooks import SQLiteStore

    with pytest.raises(GptoolsError, match="no folder"):
        SQLiteStore(tmp_path / "missing" / "store.db").connect()


def test_the_cli_contract_lets_its_own_exits_through() -> None:
    """BadInput is a GptoolsError now: cli_errors must not turn it into a failure (exit 1)."""
    from gptools.cli._main import EXIT_BAD_INPUT, BadInput, cli_errors

    with pytest.raises(BadInput) as caught, cli_errors():
        raise BadInput("bad")
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_the_sandbox_takes_only_the_root_class_from_errors() -> None:
    """docs/design.md: the sandbox shares no rule with the client, so from gptools.errors
    it imports GptoolsError and nothing else (not error_class, not is_rate_limited)."""
    taken: set[str] = set()
    for path in (PACKAGE / "sandbox").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "gptools.errors":
                taken |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module == "gptools":
                assert "errors" not in {a.name for a in node.names}, path
            elif isinstance(node, ast.Import):
                assert "gptools.errors" not in {a.name for a in node.names}, path
    assert taken == {"GptoolsError"}


def _drawing() -> list[tuple[str, str | None]]:
    """The tree drawn in errors.py's docstring as (class name, drawn parent) pairs."""
    from gptools import errors

    doc = errors.__doc__ or ""
    block = []  # the literal block after "::": indented lines, up to the next paragraph
    for line in doc.split("::", 1)[1].splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        if line.strip():
            block.append(line)
    pairs: list[tuple[str, str | None]] = []
    stack: list[tuple[int, str]] = []
    for line in block:
        body = line[4:]  # the literal block's own indent
        match = _NODE.match(body)
        assert match, f"a line of the drawing that names no class: {line!r}"
        depth = match.start("name") // 4
        while stack and stack[-1][0] >= depth:
            stack.pop()
        pairs.append((match.group("name"), stack[-1][1] if stack else None))
        stack.append((depth, match.group("name")))
    return pairs


def test_the_drawing_in_errors_py_is_the_tree() -> None:
    """Every public exception class is drawn once, under a class it derives from; every
    drawn name is a class that exists (private control-flow classes are not drawn)."""
    by_name = {k.__name__: k for k in _ours().values()}
    assert len(by_name) == len(_ours()), "two exception classes share a name"
    drawn = _drawing()
    names = [name for name, _ in drawn]
    assert len(names) == len(set(names)), f"drawn twice: {names}"
    public = {n for n in by_name if not n.startswith("_")}
    assert public - set(names) == set(), (
        f"exception classes errors.py's tree does not draw: {sorted(public - set(names))}"
    )
    for name, parent in drawn:
        klass = by_name.get(name) or getattr(builtins, name, None)
        assert klass is not None, f"errors.py draws {name}, which no module defines"
        if parent is None:
            assert name in ("GptoolsError", "KeyboardInterrupt"), f"{name} drawn as a root"
        else:
            base = by_name.get(parent) or getattr(builtins, parent)
            assert issubclass(klass, base), f"{name} is drawn under {parent} but is not one"
    assert ("LoadInterrupted", "KeyboardInterrupt") in drawn


def test_every_exception_a_caller_can_meet_is_exported() -> None:
    """A public-named exception class is in the ``__all__`` of a public module (so a caller
    can catch it by name), unless it is one of STAYS_INSIDE."""
    from tests.public_surface import public_modules

    exported = {
        getattr(importlib.import_module(m), n)
        for m in public_modules()
        for n in importlib.import_module(m).__all__
        if isinstance(getattr(importlib.import_module(m), n), type)
    }
    unexported = sorted(
        k.__name__
        for k in _ours().values()
        if not k.__name__.startswith("_") and k not in exported and k.__name__ not in STAYS_INSIDE
    )
    assert not unexported, f"exception classes no public module exports: {unexported}"
    assert {k.__name__ for k in _ours().values()} >= STAYS_INSIDE, "STAYS_INSIDE is stale"


def test_what_load_participants_raises_is_exported_at_the_top() -> None:
    from gptools.participants import JournalBusyError, LoadStopped

    assert gptools.LoadStopped is LoadStopped
    assert gptools.JournalBusyError is JournalBusyError


def test_every_drawn_class_is_reached_from_errors() -> None:
    """errors.py holds the drawing and the classes: each drawn class is defined there or
    reached through it (``errors._ELSEWHERE``), the very class its module defines, and
    ``import gptools.errors`` alone imports nothing but spec and models."""
    from gptools import errors

    by_name = {k.__name__: k for k in _ours().values()}
    for name, _parent in _drawing():
        if name == "KeyboardInterrupt":
            continue
        assert getattr(errors, name) is by_name[name], name
        assert name in dir(errors), name
    drawn = {name for name, _ in _drawing()}
    assert set(errors._ELSEWHERE) <= drawn, "errors._ELSEWHERE names a class not drawn"
    for name, module in errors._ELSEWHERE.items():
        assert by_name[name].__module__ == module, name
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        errors.NoSuchError  # noqa: B018
    code = (
        "import sys, gptools.errors; "
        "print(sorted(m for m in sys.modules if m.startswith('gptools')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['gptools', 'gptools.errors', 'gptools.models', 'gptools.spec']"
