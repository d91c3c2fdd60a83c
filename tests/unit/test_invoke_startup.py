"""torchdroid-invoke.pth: installed by both kinds of install, lazy until Invoke's config module loads, silent
when its module is gone (setup.py, workflow/invoke_startup.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PTH = "torchdroid-invoke.pth"


def _pth_line() -> str:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PTH_LINE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no PTH_LINE")


def _source_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for name in files:
        if name and not name.startswith("tests/") and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes((ROOT / name).read_bytes())
    return dest


def test_the_wheel_and_the_editable_wheel_both_put_the_pth_file_in_site_packages(tmp_path):
    src = _source_copy(tmp_path / "src")
    out = tmp_path / "dist"
    out.mkdir()
    # what pip runs for `pip install .` and `pip install -e .`, one process each (build isolation off: no network)
    for hook in ("build_wheel", "build_editable"):
        code = f"import sys; from setuptools import build_meta as b; b.{hook}(sys.argv[1])"
        res = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
    wheels = sorted(out.glob("*.whl"))
    assert [w.name for w in wheels] == ["torchdroid-0.1.0-0.editable-py3-none-any.whl",
                                        "torchdroid-0.1.0-py3-none-any.whl"]
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            assert z.read(PTH).decode() == _pth_line(), wheel.name  # at the top: site.py reads it there
            record = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))).decode()
            assert f"\n{PTH}," in f"\n{record}", "not in RECORD: pip uninstall would leave it behind"


def _run_line(extra: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """A fresh interpreter without site-packages' .pth files (-S), running the line as site.py would, then EXTRA."""
    site_dirs = [p for p in sys.path if p.endswith("site-packages")]
    prelude = f"import sys; sys.path[1:1] = {[str(ROOT), *site_dirs]!r}\n" if cwd == ROOT else ""
    return subprocess.run([sys.executable, "-S", *args, "-c", prelude + _pth_line() + extra], cwd=cwd,
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})


def test_until_invoke_config_is_imported_the_line_only_adds_a_finder():
    res = _run_line("""
import json, sys
from workflow.invoke_startup import WhenInvokeConfigLoads
ours = lambda: [m for m in sys.modules if m.split(".")[0] in ("workflow", "toolchain", "invoke", "yaml")]
before = ours()
finders = [type(f).__name__ for f in sys.meta_path]
other = WhenInvokeConfigLoads().find_spec("json.decoder")
import invoke
from invoke.config import Config
print(json.dumps({"before": sorted(before), "finders": finders, "other": other,
                  "after": [type(f).__name__ for f in sys.meta_path],
                  "wrapped": [getattr(getattr(Config, "_load_" + k), "_torchdroid", False)
                              for k in ("yaml", "yml", "json", "py")]}))
""")
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout)
    assert seen["before"] == ["workflow", "workflow.invoke_startup"]
    assert seen["finders"][0] == "WhenInvokeConfigLoads" and seen["other"] is None
    assert "WhenInvokeConfigLoads" not in seen["after"]  # it leaves once it has done its one job
    assert seen["wrapped"] == [True, True, True, True]


def test_the_line_is_silent_when_the_module_is_gone(tmp_path):
    """An older checkout under an editable install: no error block at every interpreter start."""
    res = _run_line("\nprint('started')", cwd=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (0, "started\n", "")
