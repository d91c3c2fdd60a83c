"""The shape of the tree, read from the source (ast, nothing imported): arrows point down, each meaning has one
home, no module only re-exports another, no two modules import each other, one writer of manifest.json."""

import ast
import functools
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
GROUND = "toolchain"
STAGES = ("converter", "host_nnapi", "ndk_build", "appgen", "deploy")
TOP = ("workflow", "tasks")
PACKAGES = (GROUND, *STAGES, "workflow")


def _modules(root: Path = ROOT) -> Dict[str, Path]:
    """Dotted name -> file of every product module (the packages and tasks.py)."""
    out = {"tasks": root / "tasks.py"}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(name: str, path: Path, tree: ast.Module) -> Iterator[Tuple[ast.stmt, str]]:
    """(statement, absolute dotted target) of every import anywhere in the module, lazy ones included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                yield node, f"{base}.{alias.name}"


@functools.lru_cache(maxsize=None)
def _graph(root: Path = ROOT) -> Dict[str, Set[str]]:
    """Which product modules each product module imports (an imported name is resolved to its module)."""
    modules = _modules(root)
    out: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for _, target in _imports(name, path, _parse(path)):
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                targets.add(target)
        out[name] = targets
    return out


def upward_imports(root: Path = ROOT) -> List[str]:
    """``a -> b`` for every import from a lower floor to a higher one (ground < stages < workflow < tasks)."""
    floor = {GROUND: 0, **{s: 1 for s in STAGES}, "workflow": 2, "tasks": 3}
    return sorted(f"{a} -> {b}" for a, targets in _graph(root).items() for b in targets
                  if floor[b.split(".")[0]] > floor[a.split(".")[0]])


def two_module_cycles(root: Path = ROOT) -> List[str]:
    graph = _graph(root)
    return sorted(f"{a} <-> {b}" for a, targets in graph.items() for b in targets if a < b and a in graph[b])


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def only_reexports(root: Path = ROOT) -> List[str]:
    """Modules whose whole body is imports (and ``__all__``) of another module's names; a package's
    ``__init__`` may gather its own modules (relative imports) but not another package's."""
    out = []
    for name, path in _modules(root).items():
        body = [n for n in _parse(path).body
                if not _is_docstring(n) and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
        rest = [n for n in body if n not in imports and not (
            isinstance(n, (ast.Assign, ast.AnnAssign)) and "__all__" in ast.dump(n))]
        if not imports or rest:
            continue
        if path.name != "__init__.py" or any(isinstance(n, ast.Import) or not n.level for n in imports):
            out.append(f"{path.relative_to(root)}")
    return out


def manifest_writers(root: Path = ROOT) -> List[str]:
    """Product files with a write call that names the convert manifest (its kind, its name or 'manifest.json')."""
    marks = {"MANIFEST_KIND", "MANIFEST_NAME", "manifest.json", "torchdroid.convert-manifest"}
    writes = ("write_record", "atomic_write_json", "atomic_write_text", "atomic_write_bytes", "write_text",
              "write_bytes", "dump", "open")
    out = set()
    for path in _modules(root).values():
        for node in ast.walk(_parse(path)):
            func = isinstance(node, ast.Call) and (
                node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", ""))
            if func in writes:
                named = {n.id if isinstance(n, ast.Name) else n.value for n in ast.walk(node)
                         if isinstance(n, ast.Name) or isinstance(n, ast.Constant) and isinstance(n.value, str)}
                if named & marks:
                    out.add(str(path.relative_to(root)))
    return sorted(out)


def record_readers(root: Path = ROOT) -> List[str]:
    """Product files besides the record base that call its reader (``read_record``) themselves: a record kind is a
    declaration on ``toolchain.record_base.Record`` and is read with its ``load``."""
    out = set()
    for path in _modules(root).values():
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Call) and (node.func.attr if isinstance(node.func, ast.Attribute)
                                               else getattr(node.func, "id", "")) == "read_record":
                out.add(str(path.relative_to(root)))
    return sorted(out - {"toolchain/record_base.py"})


def test_the_ground_floor_and_the_stages_import_nothing_above_them():
    assert upward_imports() == []


def test_no_module_only_reexports_another():
    assert only_reexports() == []


def test_no_two_modules_import_each_other():
    assert two_module_cycles() == []


def test_every_record_is_read_through_the_record_base():
    assert record_readers() == []


def test_one_writer_of_the_convert_manifest():
    # ConvertManifest.write (the record base's writer, with the kind ConvertManifest declares) is the one: no
    # product file writes a file by the manifest's kind or name besides it
    assert manifest_writers() == []


@pytest.fixture
def bad_tree(tmp_path):
    """A tree with each fault once: the checks above must see them."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text('"""package"""\n')
    (tmp_path / "tasks.py").write_text("from workflow import doctor\n\ndoctor.run()\n")
    (tmp_path / "workflow" / "doctor.py").write_text("def run():\n    pass\n")
    (tmp_path / "toolchain" / "checks.py").write_text("def f():\n    from deploy.adb import Adb\n    return Adb\n")
    (tmp_path / "deploy" / "adb.py").write_text("class Adb:\n    pass\n")
    (tmp_path / "ndk_build" / "ndk.py").write_text('"""Moved."""\nfrom toolchain.checks import f  # noqa: F401\n')
    (tmp_path / "ndk_build" / "__init__.py").write_text("from toolchain.checks import f\n__all__ = ['f']\n")
    (tmp_path / "converter" / "a.py").write_text("from .b import g\n\ndef f():\n    return g\n")
    (tmp_path / "converter" / "b.py").write_text("def g():\n    from .a import f\n    return f\n")
    (tmp_path / "toolchain" / "pte.py").write_text(
        "from .records import MANIFEST_KIND, write_record\n\ndef w(p, b):\n    write_record(p, MANIFEST_KIND, 1, b)\n")
    (tmp_path / "deploy" / "old.py").write_text(
        "from toolchain import records\n\ndef r(p):\n    return records.read_record(p, 'torchdroid.x', 1, '')\n")
    return tmp_path


def test_the_checks_see_each_fault(bad_tree):
    assert upward_imports(bad_tree) == ["toolchain.checks -> deploy.adb"]
    assert only_reexports(bad_tree) == ["ndk_build/__init__.py", "ndk_build/ndk.py"]
    assert two_module_cycles(bad_tree) == ["converter.a <-> converter.b"]
    assert manifest_writers(bad_tree) == ["toolchain/pte.py"]
    assert record_readers(bad_tree) == ["deploy/old.py"]
