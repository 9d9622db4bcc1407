"""The house's layers hold: import-linter's contracts in pyproject.toml, run as a test."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports is not installed: install the package with its test extra")
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_ruff_finds_nothing_in_the_package_the_tests_or_the_benchmarks() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.fail("ruff is not installed: install the package with its test extra")
    result = subprocess.run([ruff, "check", "--no-cache", "amibuild", "tests", "benchmarks", "tasks.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _amibuild_import(node) -> bool:
    import ast

    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "amibuild"
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == "amibuild" for a in node.names)


def test_every_function_level_import_of_amibuild_says_it_is_deferred() -> None:
    """A module imports amibuild's own modules at the top; one inside a function defers a heavy
    import (or breaks an unavoidable order) and a `# deferred: why` comment says so: on its line,
    or among the lines of the run of imports it belongs to."""
    import ast

    unsaid = []
    for path in sorted((ROOT / "amibuild").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                body = getattr(node, "body", None)
                if not isinstance(body, list):
                    continue
                start = node.lineno  # the run of imports begins after the last other statement
                for statement in body:
                    if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                        start = statement.end_lineno
                        continue
                    if _amibuild_import(statement):
                        run = lines[start:statement.end_lineno]
                        if not any("# deferred" in line for line in run):
                            unsaid.append(f"{path.relative_to(ROOT)}:{statement.lineno}: "
                                          f"{lines[statement.lineno - 1].strip()}")
    assert not unsaid, "function-level imports of amibuild without `# deferred: why`:\n" + "\n".join(unsaid)


def test_no_import_cycle_anywhere_in_the_package() -> None:
    """No module imports, through any chain, one that imports it back: function-level imports count."""
    import grimp

    graph = grimp.build_graph("amibuild")
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if graph.find_shortest_chain(importer=imported, imported=module):
                cycles.append(f"{module} <-> {imported}")
    assert not cycles, cycles


MODULE_LINES = 500  # issue 17: "no module over ~500 lines unless one concept needs it (say why in its docstring)"


def test_a_module_over_500_lines_says_in_its_docstring_why_it_is_one_concept() -> None:
    import ast

    unsaid = []
    for path in sorted((ROOT / "amibuild").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MODULE_LINES:
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if "one concept over ~500 lines" not in docstring.lower():
                unsaid.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not unsaid, ("modules over ~500 lines whose docstring does not say why they are one concept "
                        "(`One concept over ~500 lines: ...`), split them or say why:\n" + "\n".join(unsaid))
