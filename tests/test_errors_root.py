"""One exception root: every exception class gptools defines derives from GptoolsError."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import gptools
from gptools.errors import ConfigurationError, GptoolsError

PACKAGE = Path(gptools.__file__).resolve().parent

#: Exception classes that stay outside the root, each for a reason written here.
#: LoadInterrupted reports a Ctrl-C: it is a KeyboardInterrupt, and deriving it from
#: Exception (as GptoolsError is) would let every ``except Exception`` swallow it.
#: _Terminated carries a SIGTERM out of uvicorn to the receiver's clean-up, for the same
#: reason a BaseException; it never leaves ``gptools.webhooks.serve``.
OUTSIDE_THE_ROOT = {
    "gptools.participants._loader.LoadInterrupted",
    "gptools.webhooks._serve._Terminated",
}


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
        "gptools.webhooks._auth.AuthConfigError",
        "gptools.sandbox._refusal.Refusal",
        "gptools.participants._loader.LoadStopped",
        "gptools.participants._journal.JournalBusyError",
        "gptools.cli._main.BadInput",
        "gptools.notebook_html.WidgetManagerUnavailable",
    ):
        assert name in ours
    outside = sorted(n for n, k in ours.items() if not issubclass(k, GptoolsError))
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
        "gptools.webhooks._auth.AuthConfigError",
        "gptools.sandbox._persist.SandboxStateError",
        "gptools.participants._sources.PlayerListError",
        "gptools.participants._journal.JournalBusyError",
        "gptools.campaigns._plan.PlanFileError",
        "gptools.campaigns._validate.PlanInvalidError",
        "gptools.costs._money.UnknownCurrencyError",
        "gptools.costs._tables.StoredTableError",
        "gptools.deliverylog._readers.DeliveryLogError",
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
