"""Invoke and adbutils through their public API only, and nothing run at interpreter start-up (issue 31, item 2).

* No product file (everything but tests/ and .venv) uses an underscore member of ``invoke`` or ``adbutils``:
  neither ``invoke.x._y`` / ``from invoke... import _y`` on a name bound by an import of theirs, nor an attribute
  or ``getattr``/``setattr``/``hasattr`` name that only they define (``config._project``, ``_runtime_path``,
  ``Environment._cast``, ``_safe_connect``, ...).
* Installing the package puts no ``.pth`` file anywhere (a ``.pth`` line runs at every interpreter start).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Set

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"tests", ".venv", "build", ".git", "templates"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def defined_private_names(files, strings: bool = False) -> Set[str]:
    """Underscore names a body of code defines: functions, classes, attributes it assigns, parameters (and with
    ``strings``, identifiers in string constants: a library that builds its attribute names)."""
    names: Set[str] = set()
    for path in files:
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Call) and "_set" in (getattr(node.func, "id", ""), getattr(node.func, "attr", "")):
                # Invoke's Config._set(_project_path=...)
                names.update(k.arg for k in node.keywords if k.arg)
            elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)  # "_{}_path".format(...) and the like leave their parts as strings
    return {n for n in names if _private(n)}


def library_private_names(package: str) -> Set[str]:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
    files = [p for d in spec.submodule_search_locations for p in Path(d).rglob("*.py") if "vendor" not in p.parts]
    return defined_private_names(files, strings=True)


def _bound_to(tree: ast.AST, package: str) -> Set[str]:
    """Names a module binds to ``package`` or anything imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == package}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package and node.level == 0:
            names |= {a.asname or a.name for a in node.names}
    return names


def _from(node: ast.AST, bound: Set[str]) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in bound


def overrides(tree: ast.AST, bound: Set[str], theirs: Set[str], where: str) -> Iterator[str]:
    """A subclass of one of the package's classes that defines or sets one of the package's underscore members."""
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and any(_from(b, bound) for b in cls.bases):
            for node in ast.walk(cls):
                name = getattr(node, "name", None) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    else getattr(node, "attr", None) if isinstance(node, ast.Attribute) else None
                if name in theirs:
                    yield f"{where}:{node.lineno}: {cls.name} overrides {name}"


def _head(node: ast.JoinedStr) -> str:
    first = node.values[0] if node.values else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def _from_names(prefix: str, theirs: Set[str]) -> bool:
    return len(prefix) > 2 and any(name.startswith(prefix) for name in theirs)


def uses(path: Path, package: str, theirs_only: Set[str], root: Path = ROOT, theirs: Set[str] = frozenset()) \
        -> Iterator[str]:
    """``file:line: what`` for every underscore member of ``package`` that ``path`` uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = _bound_to(tree, package)
    where = f"{path.relative_to(root)}"
    yield from overrides(tree, bound, theirs, where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
            parts = (node.module or "").split(".") + [a.name for a in node.names]
            yield from (f"{where}:{node.lineno}: from {node.module} import {p}" for p in parts if _private(p))
        elif isinstance(node, ast.Import):
            yield from (f"{where}:{node.lineno}: import {a.name}" for a in node.names
                        if a.name.split(".")[0] == package and any(_private(p) for p in a.name.split(".")))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if (isinstance(base, ast.Name) and base.id in bound) or node.attr in theirs_only:
                yield f"{where}:{node.lineno}: .{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in theirs_only:
            yield f"{where}:{node.lineno}: {node.value!r}"  # getattr(config, "_project_path"), a table of names
        elif isinstance(node, ast.JoinedStr) and _private(_head(node)) and _from_names(_head(node), theirs):
            yield f"{where}:{node.lineno}: f{_head(node)!r}..."  # getattr(Config, f"_load_{kind}")


def product_files(root: Path = ROOT) -> List[Path]:
    return sorted(p for p in root.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(root).parts))


def private_uses(package: str, root: Path = ROOT) -> List[str]:
    files = product_files(root)
    theirs = library_private_names(package)
    # a name of theirs used on an object of unknown type: only a distinctive one (torch's `module._c` is no adb call)
    theirs_only = {n for n in theirs - defined_private_names(files) if len(n) > 3}
    return [hit for path in files for hit in uses(path, package, theirs_only, root, theirs)]


@pytest.mark.parametrize("package", ["invoke", "adbutils"])
def test_no_product_file_uses_an_underscore_member_of(package):
    assert private_uses(package) == []


def test_the_check_finds_each_kind_of_private_use(tmp_path):
    """A negative control: each way the product code once reached into Invoke is found."""
    sample = tmp_path / "sample.py"
    sample.write_text("from invoke.config import Config\nfrom invoke.env import Environment\nimport invoke\n"
                      "Config.load = Config._load_yaml\nEnvironment._cast = None\n"
                      "def f(config, kind):\n    return config._runtime_path, getattr(config, '_project_path', None), "
                      "getattr(Config, f'_load_{kind}')\n"
                      "from invoke.util import _private_thing\n"
                      "class Mine(invoke.Config):\n    def _load_json(self, path):\n        return {}\n")
    theirs = library_private_names("invoke")
    hits = [h.split(": ", 1)[1] for h in uses(sample, "invoke", theirs, tmp_path, theirs=theirs)]
    assert sorted(hits) == sorted(["from invoke.util import _private_thing", "._load_yaml", "._cast",
                                   "._runtime_path", "'_project_path'", "f'_load_'...",
                                   "Mine overrides _load_json"]), hits


def test_the_check_finds_what_deploy_adb_did_before(tmp_path):
    """A negative control for adbutils: the client torchdroid had before (a subclass of adbutils' connection
    overriding ``_safe_connect``, a private module imported, a private function called) is found, each way."""
    sample = tmp_path / "old_adb.py"
    sample.write_text("import adbutils\nfrom adbutils._adb import AdbConnection\n"
                      "class Connection(adbutils.AdbConnection):\n    def _safe_connect(self):\n        return None\n"
                      "def version(client):\n    return adbutils._adb._check_server(client.host, client.port)\n")
    theirs = library_private_names("adbutils")
    hits = [h.split(": ", 1)[1] for h in uses(sample, "adbutils", theirs, tmp_path, theirs=theirs)]
    for what in ("from adbutils._adb import _adb", "Connection overrides _safe_connect", "._adb", "._check_server"):
        assert what in hits, (what, hits)
    clean = tmp_path / "new_adb.py"
    clean.write_text("import adbutils\nadbutils.AdbClient('h', 1).device('s').sync.push(b'', '/x')\n")
    assert list(uses(clean, "adbutils", theirs, tmp_path, theirs=theirs)) == []


def test_installing_the_package_puts_no_pth_file_anywhere(tmp_path):
    """What `pip install .` installs (into a directory of its own: no network, no build isolation): no .pth."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for name in files:
        if name and not name.startswith("tests/") and (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((ROOT / name).read_bytes())
    target = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                          "--target", str(target), str(src)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (target / "workflow" / "run.py").is_file(), sorted(p.name for p in target.iterdir())
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.pth")) == []
