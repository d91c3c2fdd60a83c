"""No product function above cyclomatic complexity 15 (radon cc), the limit the project keeps (issue 31).

The product code is every ``*.py`` of the repository outside ``tests/``, a build directory and hidden directories
(``.venv``), what ``radon cc -s -n C --exclude "tests/*,.venv/*" .`` reads.  A function over the limit is split
into small, well-named functions; the failure lists every offender with its file, line and complexity.
"""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 15
NOT_PRODUCT = {"tests", "build"}  # the test suite and `invoke`'s default build_dir (a torch checkout lives there)



def product_files():
    """Every product ``*.py`` (a ``.venv`` or build directory is not entered)."""
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(top) == ROOT and d in NOT_PRODUCT))
        yield from (Path(top) / name for name in sorted(files) if name.endswith(".py"))


def functions(blocks):
    """Every function, method and nested function radon found, with its complexity."""
    from radon.visitors import Function

    for block in blocks:
        if isinstance(block, Function):
            yield block
            yield from functions(block.closures)


def above_limit():
    cc_visit = pytest.importorskip(
        "radon.complexity", reason="radon is not installed in this environment: ./run test installs it").cc_visit
    out = []
    for path in product_files():
        for f in functions(cc_visit(path.read_text(encoding="utf-8"))):
            if f.complexity > LIMIT:
                out.append(f"{path.relative_to(ROOT).as_posix()}:{f.fullname} ({f.complexity})")
    return out


def test_no_product_function_is_above_complexity_15():
    assert above_limit() == []


def test_the_check_finds_a_function_above_the_limit(tmp_path):
    """Negative control: the walk and the measure see a function of complexity 16 (and nested ones)."""
    cc_visit = pytest.importorskip("radon.complexity", reason="radon is not installed in this environment").cc_visit
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(15))
    code = f"def big(x):\n{branches}    return -1\n\n\ndef outer():\n    def inner(x):\n{branches.replace('    ', '        ')}" \
           "        return -1\n    return inner\n"
    found = {f.name: f.complexity for f in functions(cc_visit(code))}
    assert found["big"] == 16 and found["inner"] == 16
    assert any(p.name == "stats.py" for p in product_files()) and not any("tests" in p.parts for p in product_files())
