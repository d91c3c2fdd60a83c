"""What deploy refuses before it talks to any device: commit mismatch, missing records, missing APK."""

from __future__ import annotations

import logging

import pytest

from deploy import DeploySettings, deploy
from tests.deploy_support.fixtures import OTHER_COMMIT, make_inputs, write_models
from toolchain.errors import CompatibilityError, RecordError, ToolNotFound, UsageError
from tests.virtual_device.harness import held_dead_port


@pytest.fixture
def inputs(tmp_path):
    fake = tmp_path / "fake-binary"
    fake.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 11 + (183).to_bytes(2, "little") + b"\0" * 40)
    return make_inputs(tmp_path / "in", standin=fake, modes=("full",), model_size=1000)


def settings(inp, tmp_path, **kw):
    base = dict(models=inp.models, results=tmp_path / "results", build_info=inp.build_info, app_dir=inp.app_dir,
                adb_port=held_dead_port(), project="t")
    base.update(kw)
    return DeploySettings(**base)


def test_commit_mismatch_stops_unless_allowed(tmp_path, inputs, caplog):
    write_models(inputs.models, ("full",), commit=OTHER_COMMIT, size=1000)
    with pytest.raises(CompatibilityError) as e:
        deploy(settings(inputs, tmp_path))
    msg = str(e.value)
    assert "converted by another torch than the binary was built from (binary: c19eb4ad73eb)" in msg
    assert "mobilenetv2-quant_full-cpu.pt (0123456789ab)" in msg and "--allow-mismatch" in msg
    # allowed: a warning, and the deploy goes on (to the missing adb server, here)
    with caplog.at_level(logging.WARNING), pytest.raises(ToolNotFound):
        deploy(settings(inputs, tmp_path, allow_mismatch=True))
    assert "[--allow-mismatch]" in caplog.text


def test_missing_inputs_are_named_with_a_remedy(tmp_path, inputs):
    with pytest.raises(UsageError) as e:  # no binary and no APK: nothing to deploy
        deploy(settings(inputs, tmp_path, build_info=tmp_path / "nope" / "build-info.json", install=False,
                        models=tmp_path / "no-models"))
    assert "invoke build-android" in str(e.value) and "nothing to deploy" in str(e.value)
    with pytest.raises(RecordError) as e:
        deploy(settings(inputs, tmp_path, models=tmp_path / "empty"))
    assert "invoke convert" in str(e.value)
    with pytest.raises(UsageError) as e:
        deploy(settings(inputs, tmp_path, app_dir=tmp_path / "noapp", build_info=tmp_path / "nope"))
    assert "no benchmark binary and no APK" in str(e.value) and "--apk PATH" in str(e.value)
    with pytest.raises(UsageError) as e:
        deploy(settings(inputs, tmp_path, binary=tmp_path / "missing-binary"))
    assert "does not exist" in str(e.value)
    with pytest.raises(UsageError) as e:
        deploy(settings(inputs, tmp_path, variants=("quant_core",)))
    assert "no converted variant 'quant_core'" in str(e.value)
    (inputs.models / "mobilenetv2-quant_full-cpu.pt").write_bytes(b"changed")
    with pytest.raises(RecordError) as e:
        deploy(settings(inputs, tmp_path))
    assert "does not match its manifest entry" in str(e.value)


def test_a_variant_named_twice_is_deployed_once(tmp_path, inputs):
    from deploy.plan import plan_models

    once = plan_models(settings(inputs, tmp_path, variants=("quant_full",)), True)
    twice = plan_models(settings(inputs, tmp_path, variants=("quant_full", "quant_full")), True)
    assert [f.file for f in twice] == [f.file for f in once] and len(once) == 2
