"""Every command torchdroid prints for the user to copy names options that task has (issue 24 item 7): every
string in the product code that says ``invoke TASK ... --option`` is checked against the task's declared options
(the same Invoke task objects `--help` prints), so a new message that invents an option fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("appgen", "converter", "deploy", "host_nnapi", "ndk_build", "toolchain", "workflow", "tasks.py")
COMMAND = re.compile(r"invoke ([a-z][a-z-]+)([^`'\"]*)")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _task_options():
    import tasks

    out = {}
    for name in tasks.ns.task_names:
        names = {"--help", "--debug", "--json"}
        for arg in tasks.ns[name].get_arguments():
            for n in arg.names:
                names.add("--" + n.replace("_", "-"))
                if arg.kind is bool:
                    names.add("--no-" + n.replace("_", "-"))
        out[name] = names
    return out


def _texts(path: Path):
    """Every string literal (an f-string with its placeholders as X) with its line."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values), node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, node.lineno


def commands_naming_missing_options(files, options):
    checked, bad = 0, []
    for path in files:
        for text, line in _texts(path):
            for m in COMMAND.finditer(text):
                if m.group(1) not in options:
                    continue
                checked += 1
                tail = re.split(r"[;)(]| then | and |, ", m.group(2))[0]
                where = path.relative_to(ROOT) if ROOT in path.parents else path.name
                bad += [f"{where}:{line}: invoke {m.group(1)} {o}" for o in OPTION.findall(tail)
                        if o not in options[m.group(1)]]
    return checked, bad


def _product_files():
    for part in PRODUCT:
        p = ROOT / part
        yield from ([p] if p.is_file() else sorted(p.rglob("*.py")))


def test_every_printed_command_names_options_its_task_has():
    checked, bad = commands_naming_missing_options(list(_product_files()), _task_options())
    assert checked > 100  # the scan reads the messages (233 commands when written)
    assert bad == []


def test_the_scan_finds_an_option_a_task_does_not_have(tmp_path):
    """Negative control: the defect issue 24 found (check-compat told to use --binary, which it lacks)."""
    fake = tmp_path / "probe.py"
    fake.write_text('REMEDY = "run `invoke check-compat --binary PATH` again"\n')
    checked, bad = commands_naming_missing_options([fake], _task_options())
    assert checked == 1 and bad == ["probe.py:1: invoke check-compat --binary"]


# --------------------------------------------------------------------------- bare options in fixes
# A fix that says only "pass --force" names an option of the task that printed it, so that option must exist for that
# task (or the fix names the whole `invoke TASK --force` command, checked above).  Which tasks print a module's fixes:
# the longest matching key wins ("path" or "path:function" for a module whose functions serve different tasks).  A
# module every task runs (toolchain/, workflow/) may only name options every task has.
EVERY_TASK = ("convert", "bench", "verify", "bench-executorch", "deploy-executorch", "build-android", "check-compat",
              "doctor", "make-app", "build-app", "deploy", "report", "clean")
PRINTED_BY = {
    "appgen/": ("make-app",),
    "appgen/build_apk.py": ("build-app",),
    "appgen/gradle.py": ("build-app",),
    "converter/": ("convert",),
    "converter/executorch_check.py": ("bench-executorch",),
    "converter/host_bench.py": ("bench",),
    "converter/host_bench.py:HostBenchResult": ("bench", "bench-executorch"),
    "host_nnapi/": ("verify",),
    "ndk_build/": ("build-android",),
    "ndk_build/compat.py": ("check-compat", "deploy"),
    "deploy/": ("deploy", "deploy-executorch"),
    "deploy/bench.py": ("deploy",),
    "deploy/plan.py": ("deploy",),  # its binary and APK plans serve the TorchScript format only
    "deploy/preflight.py:check_space": ("deploy",),  # device_run: the TorchScript binary's runs
    "deploy/preflight.py:check_commits": ("deploy",),
    "deploy/report.py": ("report",),
    "deploy/report_html.py": ("report",),
    "deploy/results.py": ("deploy", "report"),
    "toolchain/": EVERY_TASK,
    "toolchain/tools/git.py": ("build-android",),
    "toolchain/tools/hostpython.py": ("build-android",),
    "toolchain/tools/ndk.py": ("build-android",),
    "toolchain/pins.py:require_executorch": ("convert",),
    "toolchain/fsutil.py:atomic_dir": ("make-app",),  # its one caller
    "toolchain/fsutil.py:check_not_inputs": ("convert", "make-app"),
    "toolchain/fsutil.py:claim_output_dir": ("convert",),
    "toolchain/pins.py:lane": ("build-android", "make-app", "doctor"),
    "toolchain/records.py:AppInfo": ("deploy",),
    "toolchain/tools/sdk.py:AndroidSdk": ("build-android",),
    "workflow/": EVERY_TASK,
    "workflow/clean.py": ("clean",),
    "workflow/stage_settings.py:for_formats_run": ("convert", "bench"),  # an option of a format the stage does not run
    "workflow/stage_settings.py:executorch_runtime": ("build-android",),
    "workflow/stage_settings.py:_farm": ("deploy", "deploy-executorch"),  # the device farm's settings (deploy --stf)
}
# Options of other programs a fix may quote (`git submodule update --init`, pip install --force-reinstall...): every
# quoted span that is no torchdroid command, and an unquoted pip/git/adb command to the end of its clause.
QUOTED = re.compile(r"`[^`]*`")
FOREIGN = re.compile(r"\b(?:pip|git|adb|python3?|uv) [^;,()`]*")


def _without_foreign(text: str) -> str:
    text = QUOTED.sub(lambda m: m.group(0) if m.group(0).startswith("`invoke ") else " ", text)
    return FOREIGN.sub(" ", text)


def _printed_by(where: str, function: str, table) -> tuple:
    keys = [k for k in table if f"{where}:{function}" == k or where.startswith(k)]
    return table[max(keys, key=len)] if keys else EVERY_TASK


def _remedy_texts(path: Path):
    """Every remedy text (``remedy=...``) with its line and top-level function; ``command('invoke', TASK, ...)``
    calls inside it as ``invoke TASK ...`` text."""
    def text(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(text(v.value) if isinstance(v, ast.FormattedValue) else v.value for v in node.values)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "command":
            return " ".join(text(a) for a in node.args)
        if isinstance(node, ast.BinOp):
            return text(node.left) + text(node.right)
        return "X"

    for top in ast.parse(path.read_text()).body:
        name = getattr(top, "name", "")
        for node in ast.walk(top):
            if isinstance(node, ast.keyword) and node.arg == "remedy":
                branches = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
                for b in branches:
                    yield text(b), node.value.lineno, name


def _outside_command(m: re.Match, options) -> str:
    """What follows a command's own options (checked by the scan above) in the text, which is still to check."""
    if m.group(1) not in options:
        return m.group(0)
    own = re.split(r"[;)(]| then | and |, ", m.group(2))[0]
    return " " + m.group(2)[len(own):]


def bare_options_other_tasks_lack(files, options, printed_by=PRINTED_BY):
    """Each ``--option`` of a fix outside an ``invoke TASK ...`` command that a task printing the fix lacks."""
    checked, bad = 0, []
    for path in files:
        where = str(path.relative_to(ROOT)) if ROOT in path.parents else path.name
        for text, line, function in _remedy_texts(path):
            rest = COMMAND.sub(lambda m: _outside_command(m, options), _without_foreign(text))
            for o in OPTION.findall(rest):
                checked += 1
                bad += [f"{where}:{line}: {o} ({task} has no {o})" for task in _printed_by(where, function, printed_by)
                        if o not in options[task]]
    return checked, bad


def test_every_bare_option_in_a_fix_exists_for_the_tasks_that_print_it():
    checked, bad = bare_options_other_tasks_lack(list(_product_files()), _task_options())
    assert checked > 100  # the scan reads the fixes
    assert bad == []


def test_the_bare_option_scan_finds_an_option_the_printing_task_lacks(tmp_path):
    """Negative control: the defect issue 24 found (deploy-executorch told to pass --binary, which it lacks); the
    same option inside a deploy command, another program's option and an option the task has all pass."""
    fake = tmp_path / "probe.py"
    fake.write_text('def f():\n'
                    '    raise E("x", remedy="pass the runner with --binary PATH")\n'
                    '    raise E("x", remedy="run `invoke deploy --binary PATH`, or fewer rounds with --iter 3")\n'
                    '    raise E("x", remedy="pip install --force-reinstall matplotlib; or `git fetch --tags`")\n'
                    '    raise E("x", remedy="see `invoke deploy --binary P` (or --project NAME) then --apk")\n')
    checked, bad = bare_options_other_tasks_lack([fake], _task_options(), {"probe.py": ("deploy-executorch",)})
    assert checked == 4
    assert bad == ["probe.py:2: --binary (deploy-executorch has no --binary)",
                   "probe.py:5: --apk (deploy-executorch has no --apk)"]
