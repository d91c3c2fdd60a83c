"""The farm client's own logic (deploy/stf.py): which phones it takes, the farm's address, the token kept out of
every message, the config keys of a group (deploy.stf.*)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

import tasks  # noqa: F401  its @task declarations tie each parameter to its config key (stage_settings reads them)
from deploy.stf import Farm, FarmPhone, Needs, adb_public_key, api_base, choose, needs_of, refusal
from toolchain.errors import ToolNotFound, UsageError
from toolchain.resolve import check_known_keys

TOKEN = "s3cr3t-token-0123456789"


def phone(serial="A", **kw) -> FarmPhone:
    base = dict(present=True, ready=True, using=False, owner="", abi="arm64-v8a", sdk=33, model="Pixel 7",
                version="13")
    base.update(kw)
    return FarmPhone(serial, **base)


def test_a_phone_is_taken_only_when_free_and_able_to_run_the_deploy():
    needs = Needs(("arm64-v8a",), 29)
    assert refusal(phone(), needs) is None
    assert refusal(phone(present=False), needs) == "not present (disconnected from the farm)"
    assert refusal(phone(using=True, owner="ana"), needs) == "in use by ana"
    assert refusal(phone(ready=False), needs) == "not ready (the farm is still preparing it)"
    assert refusal(phone(abi="x86_64"), needs) == "wrong ABI: it is x86_64, the binary is arm64-v8a"
    assert refusal(phone(sdk=28, version="9"), needs) == "too old: Android 9 (SDK 28) < SDK 29"
    # a 64-bit phone runs its 32-bit sibling's binaries (the phone's own ABI list decides once connected)
    assert refusal(phone(), Needs(("armeabi-v7a",))) is None
    assert refusal(phone(abi="armeabi-v7a"), Needs(("arm64-v8a",))) is not None
    fit, not_taken = choose([phone("A"), phone("B", owner="bo"), phone("C")], needs, serials=("A", "B"))
    assert [p.serial for p in fit] == ["A"] and [(n.phone.serial, n.reason) for n in not_taken] == [("B", "in use by bo")]


def test_the_farm_lists_phones_as_stf_stores_them():
    """STF keeps ``sdk`` as getprop's text and ``owner`` as an object (or null)."""
    p = FarmPhone.from_json({"serial": "R5", "present": True, "ready": True, "using": True, "sdk": "30",
                             "owner": {"email": "ana@lab", "name": "ana"}, "abi": "arm64-v8a", "model": "SM-G960F"})
    assert (p.sdk, p.owner, p.name) == (30, "ana", "R5 (SM-G960F)")
    assert FarmPhone.from_json({"serial": "X", "owner": None, "sdk": None}).owner == ""


def test_what_the_deploy_needs_of_a_phone():
    binary = SimpleNamespace(abi="arm64-v8a", api_level=24)
    runner = SimpleNamespace(abi="arm64-v8a", api_level=None)
    app = SimpleNamespace(facts=SimpleNamespace(min_sdk=26))
    plan = SimpleNamespace(binary=binary, executorch=SimpleNamespace(runner=runner), app=app)
    assert needs_of(plan, install=True) == Needs(("arm64-v8a",), 26)
    assert needs_of(plan, install=False) == Needs(("arm64-v8a",), 24)
    assert needs_of(SimpleNamespace(binary=None, executorch=None, app=None), install=True) == Needs((), 0)


def test_the_farm_address():
    assert api_base("https://stf.example.org") == "https://stf.example.org/api/v1"
    assert api_base("https://stf.example.org/api/v1/") == "https://stf.example.org/api/v1"
    assert api_base("http://lab:7100/stf") == "http://lab:7100/stf/api/v1"
    assert api_base("https://me:pw@stf.example.org") == "https://stf.example.org/api/v1"  # no credentials kept
    assert api_base("http://[fd00::5]:7100") == "http://[fd00::5]:7100/api/v1"
    for bad in ("stf.example.org", "ftp://stf", "https://", "http://stf:99999", "http://stf:port"):
        with pytest.raises(UsageError, match="is not an http"):
            api_base(bad)
    with pytest.raises(UsageError) as e:
        api_base("ftp://me:pw@stf")
    assert "pw" not in str(e.value) and "***@stf" in str(e.value)


def test_no_token_is_a_usage_error_naming_the_variable():
    with pytest.raises(UsageError, match="needs an access token in STF_TOKEN") as e:
        Farm.from_env("https://stf.example.org", env={})
    assert e.value.exit_code == 2 and "Access Tokens" in e.value.remedy
    for pasted in ("abc def", "abc\ndef", "tök3n"):  # a token pasted with its neighbour, or a line break
        with pytest.raises(UsageError, match="does not hold an access token") as e:
            Farm.from_env("https://stf.example.org", env={"STF_TOKEN": pasted})
        assert pasted not in str(e.value)


class _Echo(BaseHTTPRequestHandler):
    """A farm that says the token back in its answers: 401 first, then 500s."""

    def log_message(self, *args):
        pass

    seen_after_redirect: list = []

    def do_GET(self):
        if "redirect" in self.path:  # to a place that keeps what it is sent
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if "elsewhere" in self.path:
            _Echo.seen_after_redirect.append(self.headers.get("Authorization"))
        token = self.headers.get("Authorization", "").partition(" ")[2]
        status = 401 if "401" in self.path else 500
        body = json.dumps({"success": False, "description": f"token {token} refused"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def echo_farm():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_token_is_in_no_error_even_when_the_farm_says_it_back(echo_farm):
    farm = Farm(echo_farm, TOKEN, timeout=5, attempts=2, pause=0.01)
    with pytest.raises(ToolNotFound) as e:
        farm.call("GET", "/devices")
    assert TOKEN not in str(e.value) and "token *** refused" in str(e.value) and "2 attempts" in str(e.value)
    with pytest.raises(UsageError) as e:
        farm.call("GET", "/401")
    assert TOKEN not in str(e.value) and "refuses the access token" in str(e.value)


def test_a_redirect_is_refused_not_followed_with_the_token(echo_farm):
    farm = Farm(echo_farm + "/redirect", TOKEN, timeout=5, attempts=1)
    with pytest.raises(UsageError, match="redirects /api/v1/devices to http://127.0.0.1:.*/elsewhere") as e:
        farm.call("GET", "/devices")
    assert "the access token would go along" in str(e.value) and _Echo.seen_after_redirect == []


def test_the_adb_key_is_read_where_adb_keeps_it(tmp_path):
    (tmp_path / ".android").mkdir()
    (tmp_path / ".android" / "adbkey.pub").write_text("QAAAA... me@host\n")
    assert adb_public_key({"HOME": str(tmp_path)}) == "QAAAA... me@host"
    assert adb_public_key({"HOME": str(tmp_path / "nowhere")}) is None
    assert adb_public_key({"ANDROID_USER_HOME": str(tmp_path / ".android"), "HOME": "/x"}) == "QAAAA... me@host"


def test_a_group_of_config_keys_is_checked_key_by_key():
    check_known_keys({"deploy": {"stf": {"url": "https://stf", "count": 2}}}, "invoke.yaml")
    with pytest.raises(UsageError, match="unknown config key `deploy.stf.urll`") as e:
        check_known_keys({"deploy": {"stf": {"urll": "https://stf"}}}, "invoke.yaml")
    assert "did you mean `deploy.stf.url`" in str(e.value) and "count, lend, url" in str(e.value)
    with pytest.raises(UsageError, match="`deploy.stf` in invoke.yaml is 'https://stf', not a mapping"):
        check_known_keys({"deploy": {"stf": "https://stf"}}, "invoke.yaml")


def test_the_html_report_groups_the_phones_by_farm(tmp_path):
    from deploy.report_html import render
    from toolchain.records import ResultRow

    def row(serial, server, status="ok", reason=""):
        return ResultRow(serial=serial, device_model=f"Model {serial}", board="sm", release="13", sdk=33,
                         abi="arm64-v8a", stem="m", variant="quant_none", mode="none", backend="cpu", source="binary",
                         status=status, median_ms=1.0 if status == "ok" else None, server=server, reason=reason)

    farm_a, farm_b = "https://stf-a.example.org", "http://stf-b:7100"
    rows = [row("A1", farm_a), row("A2", farm_a, "failed", "the farm took A2 back during the run: lost"),
            row("B1", farm_b), row("L1", "127.0.0.1:5037")]
    page = render(tmp_path / "r.png", tmp_path / "r.html", "t", rows, [])
    section = page[page.index("<h2 id='farms'>"):page.index("<h2>Latency")]
    assert section.index(farm_a) < section.index("A1") < section.index("A2") < section.index(farm_b) < section.index(
        "B1")
    assert "(2 phone(s))" in section and "Model A1" in section and "the farm took A2 back" in section
    assert "L1" not in section  # a phone of an adb server is no farm's
    assert "id='farms'" not in render(tmp_path / "r.png", tmp_path / "r.html", "t", rows[3:], [])


def test_the_farm_settings_come_from_the_command_line_or_the_config():
    from workflow import stage_settings

    assert stage_settings.deploy({}).stf is None
    s = stage_settings.deploy({"deploy": {"stf": {"url": "https://stf.lab", "lend": 7200}}}, stf_count="3")
    assert (s.stf.url, s.stf.count, s.stf.lend) == ("https://stf.lab", 3, 7200.0)
    assert stage_settings.deploy({"deploy": {"stf": {"url": "https://a"}}}, stf="https://b").stf.url == "https://b"
    with pytest.raises(UsageError, match="--stf-count takes phones from a device farm, and no farm is given"):
        stage_settings.deploy({}, stf_count="3")
