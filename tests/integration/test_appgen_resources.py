"""Every generated manifest and resource set links with Android's real resource compiler (aapt).

The names a user chooses land in strings.xml and the manifest; what aapt rejects there would only
show up in Android Studio.  The bad-resource case proves the check can fail.
"""

import shutil

import pytest

from appgen import AppSettings, make_app
from deploy.apk import read_apk
from deploy.plan import app_bench_skip
from tests.appgen_support.aapt import NEEDS_AAPT, link
from tests.appgen_support.models import scratch, tiny_models
from tests.integration.test_appgen_render import _aar
from toolchain.records import APP_BENCH_CONTRACT, APP_BENCH_META, AppInfo

pytestmark = NEEDS_AAPT

HOSTILE_NAMES = [
    "Tom's %s and %d app",  # several non-positional substitutions: aapt's classic error
    '100% "quoted" <b>bold</b> & co',
    "@string/app_name",  # would be a reference without the escape
    "?android:attr/x",
    "back\\slash\\u12 and \\n",
    "日本語 🚀 ünïcödé",
    "  leading and trailing  ",
]


def _make(variant, out, **kw):
    return make_app(AppSettings(model=variant, models=tiny_models(), out=out, build_dir=out.parent / "build", **kw))


@pytest.mark.parametrize("variant", ["quant_none", "quant_core", "quant_full"])
def test_every_variant_links(variant, tmp_path):
    res = _make(variant, scratch(f"aapt-{variant}") / "project")
    done = link(res.out, tmp_path / "aapt")
    assert done.returncode == 0, done.stderr
    r_java = (tmp_path / "aapt/gen/org/torchdroid/demo/R.java").read_text()
    assert "public static final int app_name" in r_java and "activity_main" in r_java


def test_the_generated_app_declares_the_benchmark_contract(tmp_path):
    """deploy benchmarks only apps that declare it: read back from the manifest as aapt compiles it."""
    res = _make("quant_none", scratch("aapt-contract") / "project", application_id="com.example.mine")
    done = link(res.out, tmp_path / "aapt")
    assert done.returncode == 0, done.stderr
    facts = read_apk(tmp_path / "aapt" / "resources.ap_")
    assert facts.binary_manifest and facts.package == "com.example.mine"
    assert facts.bench_activity == facts.activity == "com.example.mine.MainActivity"
    assert facts.bench_contract == str(APP_BENCH_CONTRACT) and app_bench_skip(facts) is None
    assert AppInfo.load(res.out).extra["bench"]["meta_data"] == {APP_BENCH_META: APP_BENCH_CONTRACT}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_any_accepted_app_name_links(name, tmp_path):
    res = _make("quant_none", scratch("aapt-name") / "project", app_name=name,
                application_id="com.example.Name_2")
    done = link(res.out, tmp_path / "aapt")
    assert done.returncode == 0, f"{name!r}: {done.stderr}"


def test_the_old_lane_manifest_links(tmp_path):
    """seed-2020 (AGP 4.1): the package attribute is in the source manifest itself."""
    aar = _aar(tmp_path / "pytorch_android.aar")
    res = _make("quant_none", scratch("aapt-seed") / "project", lane="seed-2020", aar=aar)
    assert 'package="org.torchdroid.demo"' in (res.out / "app/src/main/AndroidManifest.xml").read_text()
    done = link(res.out, tmp_path / "aapt")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("bad,error", [
    ('<string name="app_name">Tom\'s %s and %d</string>', "Multiple substitutions specified in non-positional format"),
    ('<string name="app_name">x</string><string name="extra">\ufffe</string>', "not well-formed"),
    ('<string name="other">no app_name</string>', "No resource found that matches the given name"),
])
def test_a_bad_resource_is_rejected(bad, error, tmp_path):
    """The check can fail: the same project with one broken string does not link."""
    res = _make("quant_none", scratch("aapt-bad") / "project")
    broken = tmp_path / "res"
    shutil.copytree(res.out / "app/src/main/res", broken)
    strings = broken / "values/strings.xml"
    text = strings.read_text(encoding="utf-8")
    start = text.index('<string name="app_name"')
    end = text.index("</string>", start) + len("</string>")
    strings.write_text(text[:start] + bad + text[end:], encoding="utf-8")
    done = link(res.out, tmp_path / "aapt", res=broken)
    assert done.returncode != 0 and error in done.stderr, done.stderr
