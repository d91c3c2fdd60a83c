"""Task options from their schema keys: what to type, list options repeatable (workflow/task_options.py)."""

from __future__ import annotations

import inspect

from toolchain.settings import SCHEMA
from workflow.task_options import flag, opt, placeholder


def test_placeholders_say_what_to_type():
    assert placeholder(SCHEMA["bench.iter"], "iter") == "N"
    assert placeholder(SCHEMA["deploy.cooldown"], "cooldown") == "SECONDS"
    assert placeholder(SCHEMA["verify.rounding"], "rounding") == "qnnpack|nnapi"
    assert placeholder(SCHEMA["bench.out"], "out") == "PATH"
    assert placeholder(SCHEMA["app.abi_filters"], "abi_filters") == "ABI[,ABI...]"
    assert placeholder(SCHEMA["deploy.serials"], "serial") == "SERIAL[,SERIAL...]"
    assert placeholder(SCHEMA["deploy.servers"], "adb_server") == "HOST:PORT[,HOST:PORT...]"
    assert opt("bench.iter").help("iter").startswith("N: timed iterations (config bench.iter, default 50)")
    assert opt("convert.force").help("force") == SCHEMA["convert.force"].help
    assert flag("a text of its own").help("other") == "a text of its own"


def test_every_option_of_every_task_is_declared_once_and_says_what_to_type():
    """Every parameter but the context is an opt()/flag() declaration (read from the task's own function: Invoke's
    get_arguments pops the help it hands out); a value option's help leads with what to type; list keys repeat."""
    import re

    import tasks
    from workflow.task_options import Option

    checked = 0
    for name, t in tasks.ns.tasks.items():
        declared = inspect.signature(t.body.__wrapped__).parameters
        for param, p in list(declared.items())[1:]:
            option = p.default
            assert isinstance(option, Option), f"{name} --{param}: not declared with opt() or flag()"
            if option.is_flag:
                continue
            assert re.match(r"^[\w|:\[\],.-]+: ", option.help(param)), (name, param, option.help(param))
            assert (param in t.iterable) == (option.key.kind.base == "list"), (name, param)
            checked += 1
    assert checked >= 60


def test_an_option_is_declared_once_as_its_parameter():
    """The parameter's default names the key: Invoke sees None/False, the help and list-ness come from the key, and
    a task called from Python gets the same values as from the command line."""
    from invoke import Context

    from workflow.task_options import DEBUG, flag, opt, task

    seen = {}

    @task()
    def probe(c, iter=opt("bench.iter"), quant=opt("convert.quant"), force=opt("convert.force"),
              host=flag("run here"), debug=DEBUG):
        """A probe."""
        seen.update(iter=iter, quant=quant, force=force, host=host, debug=debug)

    params = inspect.signature(probe.body).parameters
    assert [(p, params[p].default) for p in params] == [("c", inspect.Parameter.empty), ("iter", None),
                                                        ("quant", None), ("force", False), ("host", False),
                                                        ("debug", False)]
    assert probe.iterable == ["quant"] and probe.help["host"] == "run here"
    assert probe.help["iter"] == "N: timed iterations (config bench.iter, default 50)"
    probe(Context(), iter="7")
    assert seen == {"iter": "7", "quant": None, "force": False, "host": False, "debug": False}
    args = {a.name: a for a in probe.get_arguments()}
    assert args["quant"].kind is list and args["force"].kind is bool and args["iter"].kind is str


def test_a_task_keeps_its_help_when_invoke_reads_its_arguments():
    import tasks

    first = {a.name: a.help for a in tasks.ns["bench"].get_arguments()}
    assert first == {a.name: a.help for a in tasks.ns["bench"].get_arguments()} and first["iter"].startswith("N: ")
    assert tasks.ns["bench"].help["iter"] == first["iter"]
