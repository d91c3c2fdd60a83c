"""Third-party libraries through their public API only: an adbutils release may change its underscore members (and
the connection internals behind ``.conn``) without notice, and torchdroid must not break silently when it does."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]
NOT_PRODUCT = ("tests", ".venv", "build", ".git")
FORBIDDEN_ATTRIBUTES = {"conn", "_safe_connect"}  # adbutils' connection internals, underscore or not


def product_files() -> List[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] not in NOT_PRODUCT)


def _adbutils_names(tree: ast.AST) -> set:
    """The local names bound to adbutils or to something imported from it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "adbutils"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "adbutils":
            names |= {a.asname or a.name for a in node.names}
    return names


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _private_import(node: ast.AST) -> str:
    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "adbutils":
        parts = node.module.split(".") + [a.name for a in node.names]
        return f"imports {node.module}: {[a.name for a in node.names]}" if any(p.startswith("_") for p in parts) else ""
    if isinstance(node, ast.Import):
        bad = [a.name for a in node.names if a.name.startswith("adbutils.") and "._" in a.name]
        return f"imports {bad}" if bad else ""
    return ""


def private_adbutils_uses(source: str) -> List[str]:
    """What in ``source`` reaches past adbutils' public API: an import of an underscore module or member, an
    underscore attribute of something from adbutils, ``.conn`` / ``_safe_connect`` anywhere, a subclass of an
    adbutils class (its overrides bend the library's internals)."""
    tree = ast.parse(source)
    adb = _adbutils_names(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if _private_import(node):
            found.append(f"line {line}: {_private_import(node)}")
        elif isinstance(node, ast.Attribute) and (node.attr in FORBIDDEN_ATTRIBUTES or
                                                  node.attr.startswith("_") and _root_name(node) in adb):
            found.append(f"line {line}: .{node.attr}")
        elif isinstance(node, ast.FunctionDef) and node.name in FORBIDDEN_ATTRIBUTES:
            found.append(f"line {line}: defines {node.name}")
        elif isinstance(node, ast.ClassDef) and any(_root_name(b) in adb for b in node.bases):
            found.append(f"line {line}: class {node.name} subclasses {[ast.unparse(b) for b in node.bases]}")
    return found


def test_no_private_adbutils_member():
    found = {}
    for path in product_files():
        uses = private_adbutils_uses(path.read_text(encoding="utf-8"))
        if uses:
            found[str(path.relative_to(ROOT))] = uses
    assert not found, f"adbutils used past its public API: {found}"


def test_the_check_sees_what_deploy_adb_did_before():
    """Negative control: the client torchdroid had before (a subclass of adbutils' connection overriding
    ``_safe_connect`` and wrapping ``conn``) is found, each way it reached in."""
    old = (
        "import adbutils\n"
        "from adbutils._adb import AdbConnection\n"
        "class Connection(adbutils.AdbConnection):\n"
        "    def _safe_connect(self):\n"
        "        return None\n"
        "    @property\n"
        "    def conn(self):\n"
        "        return SendAll(super().conn)\n"
        "def version(client):\n"
        "    return adbutils._adb._check_server(client.host, client.port)\n"
    )
    found = " ".join(private_adbutils_uses(old))
    for what in ("imports adbutils._adb", "subclasses ['adbutils.AdbConnection']", "defines _safe_connect",
                 "defines conn", ".conn", "._check_server"):
        assert what in found, (what, found)
    assert private_adbutils_uses("import adbutils\nadbutils.AdbClient('h', 1).device('s').sync.push(b'', '/x')\n") == []
