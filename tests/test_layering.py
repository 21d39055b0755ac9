"""Which acelera packages may import which, checked on the AST of every module (imports inside
functions included, and importlib.import_module("...") with a literal name).

- acelera/plugins and acelera/backends never import acelera.cli (plugins' commands use
  acelera.registrar.commands); backends never import acelera.plugins either;
- acelera/core imports none of acelera.registrar, .plugins, .backends, .cli, .conformance,
  except the imports listed in CORE_EXCEPTIONS (each still has to exist: fix one, drop it).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

PACKAGE = Path(__file__).resolve().parents[1] / "acelera"

FORBIDDEN = {
    "plugins": ("acelera.cli",),
    "backends": ("acelera.cli", "acelera.plugins"),
    "core": ("acelera.registrar", "acelera.plugins", "acelera.backends", "acelera.cli", "acelera.conformance"),
}

#: (module, imported name) pairs of acelera/core that break the rule, and why: none (the
#: interpreter's default delegate and LiteRT-delegate host are plugged in from acelera/__init__.py
#: through acelera/core/hosts.py)
CORE_EXCEPTIONS: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, dotted name) for every import in `source`: `from a import b` yields both `a` and
    `a.b` (b may be a module); relative imports are resolved against `module`."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                yield node.lineno, node.args[0].value


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(layer: str) -> set[tuple[str, str, int]]:
    found = set()
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        module = module_name(path)
        for line, name in imported_names(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            for prefix in FORBIDDEN[layer]:
                if under(name, prefix):
                    found.add((module, name, line))
    return found


def test_the_checker_sees_every_form_of_import():
    src = ("import acelera.cli.app\nfrom acelera import cli\nfrom acelera.cli.options import x\n"
           "def f():\n    from ..cli import app\n    importlib.import_module('acelera.cli.doctor')\n")
    names = {n for _, n in imported_names(src, "acelera.plugins.mine")}
    assert {"acelera.cli.app", "acelera.cli", "acelera.cli.options", "acelera.cli.doctor"} <= names
    assert any(under(n, "acelera.cli") for n in names)
    assert not under("acelera.client", "acelera.cli")
    assert {n for _, n in imported_names("from . import rules\n", "acelera.plugins.coreml", True)} == \
        {"acelera.plugins.coreml", "acelera.plugins.coreml.rules"}


def test_plugins_do_not_import_the_cli():
    assert not violations("plugins")


def test_backends_import_neither_the_cli_nor_plugins():
    assert not violations("backends")


def test_core_imports_no_upper_layer():
    found = violations("core")

    def excused(module: str, name: str) -> bool:
        return any(m == module and under(name, allowed) for m, allowed in CORE_EXCEPTIONS)
    unexpected = sorted((m, n, line) for m, n, line in found if not excused(m, n))
    assert not unexpected, f"acelera/core imports an upper layer: {unexpected}"
    stale = sorted(e for e in CORE_EXCEPTIONS if not any(m == e[0] and n == e[1] for m, n, _ in found))
    assert not stale, f"fixed, drop from CORE_EXCEPTIONS: {stale}"


def test_coreml_modules_import_each_other_without_a_cycle_at_import_time():
    """The coreml modules refer to each other in a circle (the package registers cli's command,
    cli reads the package's FLAGS; device loads native, native uses export, export the package
    and device), but only from inside functions: their module-level imports form no cycle."""
    coreml = PACKAGE / "plugins" / "coreml"
    graph: dict[str, set[str]] = {}
    for path in coreml.glob("*.py"):
        module = module_name(path)
        top = [n for n in ast.parse(path.read_text(encoding="utf-8")).body
               if isinstance(n, (ast.Import, ast.ImportFrom, ast.If, ast.Try))]
        names = {name for _, name in imported_names(ast.unparse(ast.Module(body=top, type_ignores=[])), module,
                                                    path.name == "__init__.py")}
        graph[module] = {n for n in names if under(n, "acelera.plugins.coreml") and n != module}
    # a submodule's own package is importing it already, not a cycle
    graph = {m: {d for d in deps if not under(m, d)} for m, deps in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for d in graph.get(start, ()):
            if d == goal or (d not in seen and (seen.add(d) or reaches(d, goal, seen))):
                return True
        return False
    assert not [m for m in graph if reaches(m, m, set())]


def test_test_modules_never_import_each_other():
    """Cases two test modules share live in helper modules (tests/cf_models.py, tests/gpu_cases.py,
    ...): importing a test module from another runs or skips its tests with it."""
    tests = Path(__file__).resolve().parent
    bad = [f"{path.name}:{line} imports {name}"
           for path in sorted(tests.rglob("test_*.py"))
           for line, name in imported_names(path.read_text(), path.stem)
           if name.split(".")[0].startswith("test_")]
    assert not bad, "\n".join(bad)
