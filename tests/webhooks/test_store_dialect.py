"""The store's dialect carries every difference between SQLite and PostgreSQL: the store's
one code path never asks which engine it is on (the behaviour on both engines is what the
other store tests check)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gptools.webhooks._connection as connection_module
import gptools.webhooks._dialects as dialects_module
import gptools.webhooks._log_io as log_io_module
import gptools.webhooks._migrations as migrations_module
import gptools.webhooks._outage_store as outage_store_module
import gptools.webhooks._queue_store as queue_store_module
import gptools.webhooks._retention as retention_module
import gptools.webhooks._store as store_module

#: The store's code: the engines, the connection's shared plumbing and its operations, the
#: migrations, and the dialects that hold their differences.
MODULES = (
    store_module,
    connection_module,
    log_io_module,
    outage_store_module,
    queue_store_module,
    retention_module,
    dialects_module,
    migrations_module,
)
TREE = ast.Module(
    body=[
        node
        for module in MODULES
        for node in ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8")).body
    ],
    type_ignores=[],
)
ENGINE_NAMES = {"sqlite", "sqlite3", "postgresql", "postgres", "pg"}
ENGINE_CLASSES = {
    "SQLiteStore",
    "PostgresStore",
    "_SQLiteDialect",
    "_PostgresDialect",
    "_SQLiteActionInserts",
    "_PostgresActionInserts",
    "SQLITE",
    "POSTGRES",
}
#: The shared code path: what runs the same on both engines.
SHARED = (
    "Store",
    "StoreConnection",
    "ConnectionCore",
    "LogOperations",
    "QueueOperations",
    "RetentionOperations",
    "OutageOperations",
    "_Transaction",
    "Dialect",
    "ActionInserts",
)
#: Words that belong to one engine (names, engine-only SQL and helpers).
ENGINE_WORDS = re.compile(
    r"sqlite|postgres|\bpg_|_pg\b|_PG\b|rowid|ctid|json_each|txid_current|pragma|"
    r"on conflict \(action_id\)|skip locked",
    re.IGNORECASE,
)


def _class(name: str) -> ast.ClassDef:
    return next(n for n in TREE.body if isinstance(n, ast.ClassDef) and n.name == name)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_the_store_never_compares_an_engine_name() -> None:
    offenders = []
    for node in ast.walk(TREE):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Constant) and str(operand.value).lower() in ENGINE_NAMES:
                    offenders.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "name"
            and ("_d" in ast.unparse(node.value) or "dialect" in ast.unparse(node.value))
        ):
            offenders.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert not offenders, f"the store branches on the dialect's name: {offenders}"


def test_the_store_never_asks_the_type_of_an_engine() -> None:
    offenders = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(TREE)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"isinstance", "issubclass", "type"}
        and (ENGINE_CLASSES | {"sqlite3", "psycopg"})
        & {
            n.id
            for arg in node.args[1:] + node.args[:1]
            for n in ast.walk(arg)
            if isinstance(n, ast.Name)
        }
    ]
    assert not offenders, f"the store branches on the engine's type: {offenders}"


def test_the_shared_code_path_names_no_engine() -> None:
    """Engine-specific SQL, helpers and names live in the dialect classes (and the engine
    classes that open connections), never in the code both engines run."""
    offenders = []
    for name in SHARED:
        cls = _class(name)
        skip = _docstrings(cls)
        for node in ast.walk(cls):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value if id(node) not in skip else ""
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            else:
                continue
            if ENGINE_WORDS.search(text):
                offenders.append(f"{name} line {node.lineno}: {text!r}")
    assert not offenders, f"engine-specific code outside the dialects: {offenders}"


def test_every_engine_has_a_dialect_with_every_difference() -> None:
    """Each dialect fills in what the base leaves open (a forgotten member would only
    fail at run time, on that engine)."""
    base = dialects_module.Dialect
    open_members = {
        "begin",
        "migration_steps",
        "purge_step",
        "row_address",
        "ts",
        "from_ts",
        "action_inserts",
        "delete_at",
    }
    for store_class in (store_module.SQLiteStore, store_module.PostgresStore):
        dialect = type(store_class.dialect)
        assert dialect is not base and issubclass(dialect, base)
        for member in open_members:
            assert member in vars(dialect), f"{dialect.__name__} does not set {member}"
