"""Issue 22 item 3: every output under build_dir.  With ``INVOKE_BUILD_DIR=alt`` (relative, as a user sets it)
convert writes alt/models and nothing under ./build, make-app finds the models there and writes alt/app, and
``clean --what outputs`` finds and removes them (before: models went to ./build/models and clean said "nothing to
clean")."""

from __future__ import annotations

import shutil

from tests.adversarial.harness import ROOT, run_invoke

SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"
ALT = {"INVOKE_BUILD_DIR": "alt", "INVOKE_CONVERT_CALIBRATION_COUNT": "8"}


def _said(out) -> str:
    return out.out[-3000:] + out.err[-3000:]


def test_build_dir_alt_holds_every_output_and_clean_finds_them(tmp_path):
    shutil.copy(SUPPORT, tmp_path / "nets.py")
    done = run_invoke(["convert", "--model", "nets.py:tiny", "--weights", "random", "--no-verify"], tmp_path, ALT)
    assert done.code == 0, _said(done)
    assert (tmp_path / "alt/models/manifest.json").is_file()
    assert not (tmp_path / "build").exists(), sorted(str(p) for p in (tmp_path / "build").rglob("*"))[:10]

    app = run_invoke(["make-app"], tmp_path, ALT)
    assert app.code == 0, _said(app)
    assert (tmp_path / "alt/app/torchdroid-app.json").is_file()
    assert (tmp_path / "alt/logs").is_dir() and any((tmp_path / "alt/logs").glob("convert-*.log"))
    assert not (tmp_path / "build").exists()

    preview = run_invoke(["clean", "--what", "outputs", "--dry-run"], tmp_path, ALT)
    assert preview.code == 0, _said(preview)
    for name in ("models", "app"):
        assert f"would remove {tmp_path / 'alt' / name} " in preview.out or f"would remove alt/{name} " in preview.out, \
            preview.out
    assert (tmp_path / "alt/models/manifest.json").is_file()  # a preview removes nothing

    gone = run_invoke(["clean", "--what", "outputs"], tmp_path, ALT)
    assert gone.code == 0, _said(gone)
    assert "nothing to clean" not in gone.out
    assert not (tmp_path / "alt/models").exists() and not (tmp_path / "alt/app").exists()
    assert not (tmp_path / "build").exists()
