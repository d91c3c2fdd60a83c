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
