"""Generated adversarial cases (issue 21, item 7): classes of input, not listed cases.

* Every config key of toolchain/settings.py gets malformed values generated from its kind (wrong type, out of
  range, not a choice, empty, structures where a scalar belongs), from a config file and from an ``INVOKE_*``
  variable: resolving it must be a usage error (exit 2) naming the key, never another exception.
* Model outputs of generated shapes and structures (tensors of 1 to 4 dimensions, nested tuples, NaN and
  infinity injected) go through convert's output checks: top-1 only for [N, classes], NaN/inf always refused.

In-process and bounded (``max_examples``, no deadline flakiness) so the suite stays within seconds.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converter.finite import output_tensors, refuse_non_finite_output
from converter.host_check import is_logits, predict
from tests.adversarial.harness import adversarial
from toolchain.errors import ConversionError, UsageError
from toolchain.config_sources import ConfigLayers
from toolchain.resolve import _FALSE, _TRUE, Resolver, Source, check_config
from toolchain.settings import KEYS, Key

CONFIG_KEYS = [k for k in KEYS if not k.cli_only]
FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])

structures = st.one_of(st.dictionaries(st.text(max_size=5), st.integers(), min_size=1, max_size=3),
                       st.lists(st.integers(), max_size=3))


def _not_int_text(s: str) -> bool:
    try:
        int(s.strip().replace("_", ""), 10)
    except ValueError:
        return True
    return False


def _not_float_text(s: str) -> bool:
    try:
        return not math.isfinite(float(s.strip()))
    except ValueError:
        return True


def _out_of_range(kind, integer: bool):
    parts = []
    if kind.min is not None:
        lo = int(math.ceil(kind.min)) - 1 if integer else kind.min
        parts.append(st.integers(max_value=lo) if integer else st.floats(max_value=lo, exclude_max=True, allow_nan=False,
                                                                         allow_infinity=False))
    if kind.max is not None:
        hi = int(math.floor(kind.max)) + 1 if integer else kind.max
        parts.append(st.integers(min_value=hi) if integer else st.floats(min_value=hi, exclude_min=True, allow_nan=False,
                                                                         allow_infinity=False))
    return parts


def malformed(key: Key, text: bool):
    """Values that ``key`` must refuse; ``text``: as an environment variable gives them (strings only)."""
    kind = key.kind
    words = st.text(max_size=12)
    if kind.base == "int":
        bad = [words.filter(_not_int_text)] + [s.map(str) if text else s for s in _out_of_range(kind, True)]
        if not text:
            bad += [st.booleans(), st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
                    structures]
    elif kind.base == "float":
        bad = [words.filter(_not_float_text), st.sampled_from(["nan", "inf", "-inf"])]
        bad += [s.map(repr) if text else s for s in _out_of_range(kind, False)]
        if not text:
            bad += [st.booleans(), st.sampled_from([math.nan, math.inf]), structures]
    elif kind.base == "bool":
        bad = [words.filter(lambda s: s.strip().lower() not in _TRUE + _FALSE)]
        if not text:
            bad += [st.integers().filter(lambda i: i not in (0, 1)), st.floats(), structures]
    elif kind.base == "path":
        bad = [st.sampled_from(["", " ", "\t"]), words.map(lambda s: s + "\x00x")]
        if not text:
            bad += [st.integers(), st.booleans(), structures]
    elif kind.base == "str" and kind.choices:
        bad = [words.filter(lambda s: s.strip().lower() not in kind.choices)]
        if not text:
            bad += [structures]
    elif kind.base == "str":
        bad = [st.sampled_from(["", "  "])]
        if not text:
            bad += [st.booleans(), structures]
    else:  # list
        bad = [] if text else [st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2),
                               st.lists(st.one_of(st.none(), st.booleans(), st.dictionaries(st.text(), st.integers())),
                                        min_size=1, max_size=3).filter(lambda xs: any(x is not None for x in xs) or True)]
        if kind.choices:
            item = words.filter(lambda s: s.strip() and "," not in s and s.strip() not in kind.choices)
            bad += [item] if text else [item, st.lists(item, min_size=1, max_size=3)]
    if not bad:
        return st.nothing()
    # an empty INVOKE_* variable of a key without a default means "not set" (resolve.py): not malformed
    return st.one_of(*bad).filter(lambda v: not (text and key.default is None and v == ""))


def _nested(name: str, value) -> dict:
    node: dict = {}
    top = node
    parts = name.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return top


def FakeConfig(project=None, env=None) -> ConfigLayers:
    """What toolchain.resolve reads of an Invoke run: the INVOKE_* variables over a project file's data."""
    return ConfigLayers([(Source("env"), env or {}), (Source("file", "/somewhere/invoke.yaml"), project or {})])


def _assert_usage_error_naming(key: Key, config, whole: bool = False) -> None:
    with pytest.raises(UsageError) as err:
        Resolver(config).get(key.name)
    e = err.value
    assert e.exit_code == 2
    text = f"{e.what} {e.cause} {e.remedy}"
    assert key.name in text, text
    if whole:  # the up-front check of the whole config (before any stage) says so too
        with pytest.raises(UsageError):
            check_config(config)


@adversarial("settings", "generated malformed value (config file)")
@pytest.mark.parametrize("key", CONFIG_KEYS, ids=[k.name for k in CONFIG_KEYS])
def test_every_key_refuses_malformed_values_from_a_config_file(key):
    strategy = malformed(key, text=False)
    if strategy.is_empty:
        pytest.skip("no malformed value of this kind")

    @FAST
    @given(strategy)
    def check(value):
        _assert_usage_error_naming(key, FakeConfig(project=_nested(key.name, value)), whole=True)

    check()


TEXT_KEYS = [k for k in CONFIG_KEYS if not (k.kind.base == "list" and not k.kind.choices)]


@adversarial("settings", "generated malformed value (environment variable)")
@pytest.mark.parametrize("key", TEXT_KEYS, ids=[k.name for k in TEXT_KEYS])
def test_every_key_refuses_malformed_text_from_the_environment(key):
    @FAST
    @given(malformed(key, text=True))
    def check(value):
        _assert_usage_error_naming(key, FakeConfig(env=_nested(key.name, value)))
        with pytest.raises(UsageError) as err:
            Resolver(FakeConfig(env=_nested(key.name, value))).get(key.name)
        assert key.env_var in err.value.cause

    check()


# --------------------------------------------------------------------------- generated model outputs


def tensors(finite: bool = True):
    shapes = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=4)
    return shapes.flatmap(lambda s: st.builds(
        lambda seed, where, what: _tensor(s, seed, None if finite else (where, what)),
        st.integers(0, 2 ** 16), st.integers(0, 10 ** 6), st.sampled_from([math.nan, math.inf, -math.inf])))


def _tensor(shape, seed, poison):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    if poison is not None:
        t.view(-1)[poison[0] % t.numel()] = poison[1]
    return t


def outputs(finite: bool):
    leaf = tensors(True) if finite else st.one_of(tensors(True), tensors(False))
    return st.recursive(leaf, lambda inner: st.tuples(inner, inner) | st.lists(inner, min_size=1, max_size=3),
                        max_leaves=4)


def _finite(y) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in output_tensors(y))


@adversarial("convert", "generated model output (shape, structure, NaN/inf)")
@settings(max_examples=60, deadline=None)
@given(outputs(finite=False))
def test_non_finite_outputs_of_any_structure_are_refused(y):
    if _finite(y):
        refuse_non_finite_output(y, "m", "input #0")  # finite: no complaint
        return
    with pytest.raises(ConversionError) as err:
        refuse_non_finite_output(y, "m", "input #0")
    assert "NaN or infinite" in err.value.what and "output #" in err.value.cause


@adversarial("convert", "generated model output (shape, structure, NaN/inf)")
@settings(max_examples=60, deadline=None)
@given(outputs(finite=True), st.integers(1, 4))
def test_top1_is_measured_only_for_classification_logits(y, n):
    first = output_tensors(y)[0]
    batch = torch.rand(n, 3, 4, 4)

    def module(b):  # a model whose output keeps the generated shape, with the batch's N in front
        if first.dim() > 1:
            return first[:1].expand(b.shape[0], *first.shape[1:])
        return first.new_ones(b.shape[0]) * first.sum()

    got = predict(module, batch)
    shaped = module(batch)
    if is_logits(shaped):
        assert got is not None and len(got) == n and all(0 <= k < shaped.shape[1] for k in got)
    else:
        assert got is None
