"""Guards that keep docs/ true to the code: spec names, the module map, links and paths, and
the documentation site's build settings (offline, strict)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from gptools import spec

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Every page of the site that is a file (guides and references included).
DOC_FILES = sorted(DOCS.rglob("*.md"))
MKDOCS = ROOT / "mkdocs.yml"
HOOKS = ROOT / "scripts" / "docs" / "hooks.py"
#: Pages that show where a deployment puts its files on purpose (/etc, /var/lib, /opt).
DEPLOYMENT_PAGES = {"guides/receiver.md", "guides/operations.md"}
PROVIDER_API = DOCS / "provider-api.md"
DESIGN = DOCS / "design.md"
SPEC_SOURCE = ROOT / "gptools" / "spec.py"
#: The comment line in spec.py above which every value is a published rule.
ASSUMPTIONS_BANNER = "# Assumptions: each gap"

_SPEC_NAME = re.compile(r"\bspec\.(?!py\b|md\b)([A-Za-z_][A-Za-z0-9_]*)")  # spec.py, spec.md: files
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: Absolute filesystem paths; API paths (/api/v1/...) are not among these roots.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:work|home|tmp|root|usr|etc|var|opt|mnt)/")


@functools.cache
def _generated() -> frozenset[str]:
    """The files of the site that scripts/docs/hooks.py writes at build time."""
    loader = importlib.util.spec_from_file_location("gptools_docs_hooks", HOOKS)
    assert loader is not None and loader.loader is not None
    hooks = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(hooks)
    generated: frozenset[str] = hooks.GENERATED
    return generated


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _cited(path: Path) -> set[str]:
    return set(_SPEC_NAME.findall(_text(path)))


def _published_names() -> list[str]:
    """Public top-level names of spec.py above the assumptions banner."""
    source = _text(SPEC_SOURCE)
    banner_line = source[: source.index(ASSUMPTIONS_BANNER)].count("\n") + 1
    names: list[str] = []
    for node in ast.parse(source).body:
        if node.lineno >= banner_line:
            break
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
    return [n for n in names if not n.startswith("_")]


def test_docs_exist() -> None:
    assert {_id(p) for p in DOC_FILES} >= {"design.md", "performance.md", "provider-api.md"}


def _id(path: Path) -> str:
    return str(path.relative_to(DOCS))


@pytest.mark.parametrize("doc", DOC_FILES, ids=_id)
def test_every_spec_name_a_doc_cites_exists(doc: Path) -> None:
    missing = sorted(n for n in _cited(doc) if not hasattr(spec, n))
    assert not missing, f"{doc.name} cites names gptools.spec does not have: {missing}"


def test_provider_api_cites_every_published_spec_name() -> None:
    published = _published_names()
    assert len(published) > 40  # the banner was found and the parse saw the module
    missing = sorted(set(published) - _cited(PROVIDER_API))
    assert not missing, (
        f"docs/provider-api.md does not cite these published names of gptools.spec: {missing}"
    )


def test_provider_api_cites_every_assumption() -> None:
    cited = _cited(PROVIDER_API)
    missing = sorted(
        name for a in spec.ASSUMPTIONS for name in a.name.split(" / ") if name not in cited
    )
    assert not missing, f"docs/provider-api.md does not cite these assumptions: {missing}"


@pytest.mark.parametrize("doc", DOC_FILES, ids=_id)
def test_docs_name_no_path_outside_the_repository(doc: Path) -> None:
    text = _text(doc)
    assert "../shared" not in text
    if _id(doc) in DEPLOYMENT_PAGES:
        text = re.sub(r"(?<![\w.:/])/(?:etc|var/lib|opt)/", "", text)
    assert not _ABSOLUTE_PATH.search(text), _ABSOLUTE_PATH.search(text)


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize(
    "doc", [ROOT / "README.md", *DOC_FILES], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_relative_link_resolves_inside_the_repository(doc: Path) -> None:
    for target in _LINK.findall(_text(doc)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (doc.parent / path_part).resolve() if path_part else doc
        assert resolved.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
        if resolved.is_relative_to(DOCS) and str(resolved.relative_to(DOCS)) in _generated():
            continue  # written by the site's build
        assert resolved.is_file(), f"{doc.name}: {target} is not a file of the repository"
        if fragment and resolved.suffix == ".md":
            assert fragment in _anchors(_text(resolved)), f"{doc.name}: no anchor {target}"


# --------------------------------------------------------------------------------------
# The module map of docs/design.md against the package's real imports
# --------------------------------------------------------------------------------------


def _unit(module: str) -> str:
    """The unit of the module map a module belongs to (``gptools`` itself: ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _real_imports() -> dict[str, set[str]]:
    """For each unit, the other units its modules import (any import statement)."""
    package = ROOT / "gptools"
    edges: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        module_parts = parts[:-1] if is_package else parts
        here = _unit(".".join(module_parts))
        targets: list[str] = []
        for node in ast.walk(ast.parse(_text(path))):
            if isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module_parts if is_package else module_parts[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                if module == "gptools" or node.module is None:
                    targets += [f"{module}.{a.name}" for a in node.names]
                else:
                    targets.append(module)
        for target in targets:
            if target.startswith("gptools.") and _unit(target) != here:
                edges.setdefault(here, set()).add(_unit(target))
    return edges


def _documented_imports() -> dict[str, set[str]]:
    """The "imports" column of docs/design.md's module map, per unit."""
    text = _text(DESIGN)
    section = text[text.index("## Module map") : text.index("## Data flows")]
    documented: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`").rstrip("/")
        unit = "__init__" if name == "gptools/__init__.py" else name.split("/")[0]
        allowed = re.findall(r"`([\w]+)`", re.sub(r"\([^)]*\)", "", cells[2]))
        documented.setdefault(unit, set()).update(allowed)
    return documented


def test_design_module_map_lists_every_import_the_package_makes() -> None:
    documented = _documented_imports()
    real = _real_imports()
    assert "client" in real and "sandbox" in documented  # both sides were parsed
    undocumented = {
        unit: sorted(targets - documented.get(unit, set()))
        for unit, targets in real.items()
        if targets - documented.get(unit, set())
    }
    assert not undocumented, f"imports missing from docs/design.md's module map: {undocumented}"


def test_imports_run_one_way() -> None:
    real = _real_imports()
    below_client = (
        "spec",
        "models",
        "errors",
        "costs",
        "campaigns",
        "webhooks",
        "deliverylog",
        "sandbox",
    )
    offenders = sorted(unit for unit in below_client if "client" in real.get(unit, set()))
    assert not offenders, f"these import gptools.client, against docs/design.md: {offenders}"
    assert not real.get("spec"), "gptools.spec imports nothing of ours"


# --------------------------------------------------------------------------------------
# The documentation site: built by `make docs` (and `make test`) with these settings
# --------------------------------------------------------------------------------------

#: Plugins that work offline; anything else could fetch at build time.
_OFFLINE_PLUGINS = {"search", "autorefs", "mkdocstrings"}


def _site_config() -> dict[str, object]:
    config: dict[str, object] = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))
    return config


def _nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return {page for item in nav for page in _nav_pages(item)}
    if isinstance(nav, dict):
        return {page for value in nav.values() for page in _nav_pages(value)}
    return set()


def test_site_builds_strict_and_offline() -> None:
    config = _site_config()
    assert config["strict"] is True
    validation = config["validation"]
    assert isinstance(validation, dict)
    assert set(validation.values()) == {"warn"}  # with strict, every unresolved link fails
    theme = config["theme"]
    assert isinstance(theme, dict) and theme["name"] == "material"
    assert theme["font"] is False  # Material would fetch Google Fonts otherwise
    plugins = config["plugins"]
    assert isinstance(plugins, list)
    names = {p if isinstance(p, str) else next(iter(p)) for p in plugins}
    assert names <= _OFFLINE_PLUGINS, names - _OFFLINE_PLUGINS
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    test_target = re.search(r"^test:(.*)$", makefile, re.MULTILINE)
    assert test_target is not None and "docs" in test_target.group(1).split()
    assert re.search(r"^docs:.*\n\t.*mkdocs build --strict", makefile, re.MULTILINE)


def test_every_page_is_in_the_site_nav() -> None:
    pages = _nav_pages(_site_config()["nav"])
    generated = {p for p in _generated() if p.endswith(".md")}
    assert generated <= pages
    assert {_id(p) for p in DOC_FILES} == pages - generated
