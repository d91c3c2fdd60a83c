"""Invoke, adbutils, torch and executorch through their public API only, and nothing run at interpreter start-up
(issue 31, item 2).

* No product file (everything but tests/ and .venv) uses an underscore member of ``invoke`` or ``adbutils``:
  neither ``invoke.x._y`` / ``from invoke... import _y`` on a name bound by an import of theirs, nor an attribute
  or ``getattr``/``setattr``/``hasattr`` name that only they define (``config._project``, ``_runtime_path``,
  ``Environment._cast``, ``_safe_connect``, ...).
* The same for ``torch`` and ``executorch``, but for the uses docs/architecture.md lists under "Private members of
  dependencies we still use, and why" (ALLOWED: torch has no public equivalent for them); any other fails.
* Installing the package puts no ``.pth`` file anywhere (a ``.pth`` line runs at every interpreter start).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Optional, Set

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


# Python's own public API that starts with an underscore (namedtuple's, urllib's parse results; os._exit): nobody's
# private member
PYTHON_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"}
_IDENTIFIER = re.compile(r"(?<!\w)(_[A-Za-z0-9]\w*)")
_NOT_THEIRS = {"vendor", "third-party", "third_party"}  # what a package bundles from others


def library_private_names(package: str) -> Set[str]:
    """Every underscore identifier in the package's Python source: what it defines, including the parts of names it
    builds from strings (``"_{}_path"``), and what it uses (a superset, found in seconds for all of torch)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
    names: Set[str] = set()
    for d in spec.submodule_search_locations:
        for path in Path(d).rglob("*.py"):
            if not _NOT_THEIRS & set(path.parts):
                names.update(_IDENTIFIER.findall(path.read_text(encoding="utf-8", errors="replace")))
    return {n for n in names if _private(n)} - PYTHON_API


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


def _attribute_names(tree: ast.AST) -> Set[int]:
    """The string constants a ``getattr``/``setattr``/``hasattr``/``delattr`` call names an attribute with."""
    return {id(node.args[1]) for node in ast.walk(tree) if isinstance(node, ast.Call) and len(node.args) > 1
            and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr", "delattr")}


def uses(path: Path, package: str, theirs_only: Set[str], root: Path = ROOT, theirs: Set[str] = frozenset(),
         any_string: bool = True) -> Iterator[str]:
    """``file:line: what`` for every underscore member of ``package`` that ``path`` uses (``any_string``: a string
    of their names anywhere, as a table of names; else only one that names an attribute: torch's operator names and
    state-dict keys, ``"_unsafe_view"``, ``"_packed_params"``, are data, not members)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = _bound_to(tree, package)
    named = None if any_string else _attribute_names(tree)
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
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
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in theirs_only \
                and (named is None or id(node) in named) and id(node) not in in_fstrings:
            yield f"{where}:{node.lineno}: {node.value!r}"  # getattr(config, "_project_path"), a table of names
        elif isinstance(node, ast.JoinedStr) and _private(_head(node)) and _from_names(_head(node), theirs):
            yield f"{where}:{node.lineno}: f{_head(node)!r}..."  # getattr(Config, f"_load_{kind}")


def product_files(root: Path = ROOT) -> List[Path]:
    return sorted(p for p in root.rglob("*.py") if not SKIP_DIRS & set(p.relative_to(root).parts))


# short names of theirs distinctive enough to find on an object of unknown type (torch's ScriptModule._c)
SHORT = {"torch": {"_c"}}
LARGE = {"torch", "executorch"}  # strings: only attribute names (their operator names and keys are data)


def private_uses(package: str, root: Path = ROOT, files: Optional[List[Path]] = None) -> List[str]:
    files = product_files(root) if files is None else files
    theirs = library_private_names(package)
    # a name of theirs used on an object of unknown type: only a distinctive one (torch's `module._c` is no adb call)
    theirs_only = {n for n in theirs - defined_private_names(files) if len(n) > 3} | SHORT.get(package, set())
    return [hit for path in files
            for hit in uses(path, package, theirs_only, root, theirs, any_string=package not in LARGE)]


# The private members of torch that product code still uses, each in docs/architecture.md "Private members of
# dependencies we still use, and why" (file, what: no line, so edits elsewhere in the file do not matter)
_NNAPI_PREPARE = "import torch.backends._nnapi.prepare"  # torch's only NNAPI converter lives in a private module
_SERIALIZER = ("from torch.backends._nnapi.serializer import _nnapi",
               "from torch.backends._nnapi.serializer import _NnapiSerializer")
ALLOWED = {
    "torch": {
        ("benchmarks/bench_convert.py", _NNAPI_PREPARE), ("benchmarks/bench_convert.py", "._nnapi"),
        ("benchmarks/bench_host_nnapi.py", "from torch.backends._nnapi.prepare import _nnapi"),
        ("converter/export.py", _NNAPI_PREPARE),
        *(("converter/precheck.py", what) for what in _SERIALIZER),  # ADDER_MAP: what the serializer converts
        *(("host_nnapi/reference.py", what) for what in _SERIALIZER),  # its operand map of a conversion
        ("host_nnapi/reference.py", "._C"), ("host_nnapi/reference.py", "._create_function_from_graph"),
        ("host_nnapi/reference.py", "._c"),  # the probe: a TorchScript graph run as a function of the module
        ("host_nnapi/reference.py", "._jit_pass_constant_propagation"), ("host_nnapi/reference.py", "._jit_pass_dce"),
        # check-compat: every method of every submodule of a TorchScript file (torch lists a module's methods
        # nowhere else)
        ("ndk_build/compat.py", "._c"), ("ndk_build/compat.py", "._method_names"),
        ("ndk_build/compat.py", "._get_method"),
    },
}


def unlisted(hits: List[str], package: str) -> List[str]:
    """The hits ALLOWED does not list."""
    allowed = ALLOWED.get(package, set())
    return [h for h in hits if (h.split(":", 1)[0], h.split(": ", 1)[1]) not in allowed]


@pytest.mark.parametrize("package", ["invoke", "adbutils", "torch", "executorch"])
def test_no_product_file_uses_an_underscore_member_of(package):
    assert unlisted(private_uses(package), package) == []


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


def test_the_check_finds_what_the_product_did_with_torch_and_executorch_before(tmp_path):
    """A negative control for torch and executorch: the private calls the product code made before (the app's
    quantized input, ExecuTorch's threadpool size, a look at a ScriptModule's ``_c``) are found and not allowed;
    an operator name in a table, namedtuple's ``_replace`` and ``os._exit`` are not theirs."""
    sample = tmp_path / "old_torch.py"
    sample.write_text("import os\nimport torch\nfrom executorch.extension.pybindings import portable_lib\n"
                      "GRID_KEEPING = {'view', '_unsafe_view'}\n"
                      "def f(pixels, m, parts):\n"
                      "    q = torch._make_per_tensor_quantized_tensor(pixels.contiguous(), 0.5, 3)\n"
                      "    portable_lib._unsafe_reset_threadpool(2)\n"
                      "    parts._replace(netloc='x')\n"
                      "    os._exit(0)\n"
                      "    return q, m._c, hasattr(m, '_c')\n")
    torch_hits = [h.split(": ", 1)[1] for h in unlisted(private_uses("torch", tmp_path, [sample]), "torch")]
    assert sorted(torch_hits) == sorted(["._make_per_tensor_quantized_tensor", "._c", "'_c'"]), torch_hits
    et_hits = [h.split(": ", 1)[1] for h in unlisted(private_uses("executorch", tmp_path, [sample]), "executorch")]
    assert et_hits == ["._unsafe_reset_threadpool"], et_hits


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


def test_the_venv_run_sets_up_holds_no_pth_of_torchdroid():
    """./run installs torchdroid's dependencies, not torchdroid: its `pip install -e` put
    ``__editable__.torchdroid-*.pth`` (setuptools' finder, run at every interpreter start) in the venv."""
    import importlib.metadata
    import site

    if not (Path(sys.prefix) / ".torchdroid-setup").is_file():
        pytest.skip("this interpreter's environment was not set up by ./run")
    dirs = [Path(d) for d in site.getsitepackages()]
    pths = sorted(p.name for d in dirs if d.is_dir() for p in d.glob("*.pth") if "torchdroid" in p.name.lower()
                  or "torchdroid" in p.read_text(encoding="utf-8", errors="replace").lower())
    assert pths == [], pths
    installed = [d.metadata["Name"] for d in importlib.metadata.distributions(path=[str(d) for d in dirs])]
    assert "torchdroid" not in installed  # neither installed nor editable: this checkout is the one copy
