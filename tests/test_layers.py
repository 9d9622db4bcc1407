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


# Function-level imports in amibuild/ (the sandbox, an annex, apart): each defers an optional extra or a heavy
# library on a path few runs take, and says so. The cli's task table imports a task's module when it runs.
FUNCTION_IMPORTS = 14


def _function_level_imports(root: Path, *, skip: tuple[str, ...]) -> list[str]:
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        if any(part in skip for part in path.relative_to(root).parts[:1]):
            continue
        seen = set()
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):  # a nested function's imports are seen once
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in seen:
                        seen.add(node.lineno)
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_function_level_imports_stay_few() -> None:
    found = _function_level_imports(ROOT / "amibuild", skip=("sandbox",))
    assert len(found) <= FUNCTION_IMPORTS, (
        f"{len(found)} function-level imports in amibuild/, at most {FUNCTION_IMPORTS}: import "
        "at the module's top, or defer only an optional extra or a heavy library on a rare path:\n" + "\n".join(found))


def test_no_module_imports_a_private_name_of_another() -> None:
    import ast

    found = []
    for path in sorted((ROOT / "amibuild").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("amibuild"):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}"
                          for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, ("a name another module imports is part of its module's interface: name it without the "
                       "underscore\n" + "\n".join(found))


MODULE_LINES = 500  # a module over this many lines is listed, with why it is one concept, in LONG_MODULES
LONG_MODULES = ROOT / "tests" / "data" / "long_modules.txt"
DOCSTRING_LINES = 15  # a module's docstring says what it is; the rationale lives in docs/dev/decisions.md


def test_a_module_over_500_lines_is_listed_with_why_it_is_one_concept() -> None:
    allowed = {}
    for line in LONG_MODULES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            path, _, reason = (part.strip() for part in line.partition("|"))
            assert reason, f"{LONG_MODULES.name}: {path} names no reason"
            allowed[path] = reason
    long = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8").count("\n")
            for path in sorted((ROOT / "amibuild").rglob("*.py"))}
    long = {path: n for path, n in long.items() if n > MODULE_LINES}
    unlisted = [f"{path}: {n} lines" for path, n in long.items() if path not in allowed]
    assert not unlisted, (f"modules over {MODULE_LINES} lines not listed in {LONG_MODULES.name}; split them or "
                          "list them with why they are one concept:\n" + "\n".join(unlisted))
    stale = sorted(set(allowed) - set(long))
    assert not stale, f"listed in {LONG_MODULES.name} but not over {MODULE_LINES} lines (drop them): {stale}"


def test_every_module_docstring_is_at_most_15_lines() -> None:
    import ast

    over = []
    for path in sorted((ROOT / "amibuild").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if ast.get_docstring(tree) is not None:
            lines = tree.body[0].end_lineno - tree.body[0].lineno + 1
            if lines > DOCSTRING_LINES:
                over.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not over, (f"module docstrings over {DOCSTRING_LINES} lines (say what the module is; the rationale "
                      "goes to docs/dev/decisions.md):\n" + "\n".join(over))
