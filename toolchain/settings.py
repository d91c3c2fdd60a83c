"""Every option and config key of torchdroid, declared once: type, range or choices, default, help.

How to add an option
--------------------
1. Add one ``Key`` line to :data:`KEYS` below, in the section of its stage::

       Key("deploy.cooldown", Num(min=0), 0.0, "seconds to wait between models"),

   The name is the config key (``invoke.yaml`` ``deploy: {cooldown: 5}``, or the variable
   ``INVOKE_DEPLOY_COOLDOWN``).  ``cli_only=True`` declares a command-line option that has no
   config key (``--force`` and the like).  The type checks the value from every source and
   the range or choices are part of it; a bad value is a usage error (exit 2) that names the
   option or key and where the value came from.
2. Read it in the stage's resolution function in ``workflow/stage_settings.py``:
   ``r.get("deploy.cooldown")`` (its command-line value is that of the task parameter declared for the key in
   step 3) and pass it to the stage's settings dataclass.
3. In ``tasks.py`` add the parameter to the task as ``cooldown=opt("deploy.cooldown")``
   (:mod:`workflow.task_options`): the option, its help (led by what to type, ``SECONDS: ...``), its
   list-ness and the value the body sees when it is not given (``None``, never the real default: that
   lives here) all come from this key.  On/off options are two flags, ``install=opt("deploy.install")``
   and ``no_install=flag("...")``, read with ``r.get_flag("deploy.install")`` (``--no-x`` is ``no_`` and the declared parameter), so the command line can switch on what
   the config has off and the other way round.

Defaults live only here: the settings dataclasses of the stages take their values from the
resolution functions (their own defaults are for tests that build settings by hand).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from . import layout, pins
from .layout import UnderBuildDir
from .variants import MODES

# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Kind:
    """A value's type with its range or choices; ``parse`` turns text or YAML data into it."""

    base: str  # int | float | str | bool | path | list
    min: Optional[float] = None
    max: Optional[float] = None
    choices: Tuple[str, ...] = ()  # for str, and for the items of a list
    item: str = ""  # what one item of a list is called in messages ("ABI", "quantization mode")
    directory: bool = False  # a path: a directory (or one to create); a file there, or on its way, is refused

    def describe(self) -> str:
        if self.base == "list":
            inner = f" of {', '.join(self.choices)}" if self.choices else ""
            return f"a list{inner} (YAML list, or comma-separated)"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        word = {"int": "a whole number", "float": "a number", "str": "a text", "bool": "true or false",
                "path": "the path of a directory" if self.directory else "a path"}[self.base]
        return word + _range_words(self.min, self.max)


def _range_words(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f" from {_num(lo)} to {_num(hi)}"
    if lo is not None:
        return f" >= {_num(lo)}" if lo != 0 else " >= 0"
    if hi is not None:
        return f" <= {_num(hi)}"
    return ""


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


SQLITE_MAX_INT = 2 ** 63 - 1  # the largest id SQLite stores (an INTEGER is 8 bytes, signed)


def Int(min: Optional[int] = None, max: Optional[int] = None) -> Kind:  # noqa: A002 - reads like the schema
    return Kind("int", min, max)


def Num(min: Optional[float] = None, max: Optional[float] = None) -> Kind:  # noqa: A002
    return Kind("float", min, max)


def Text() -> Kind:
    return Kind("str")


def Choice(*choices: str, item: str = "") -> Kind:
    return Kind("str", choices=tuple(choices), item=item)


def Flag() -> Kind:
    return Kind("bool")


def PathKind(directory: bool = False) -> Kind:
    return Kind("path", directory=directory)


def ListOf(*choices: str, item: str = "") -> Kind:
    return Kind("list", choices=tuple(choices), item=item)


@dataclass(frozen=True)
class Key:
    name: str  # dotted config key: section.key
    kind: Kind
    default: Any  # None: not set (the resolution function says what that means); UnderBuildDir: <build_dir>/name
    help: str
    cli_only: bool = False  # a command-line option without a config key
    metavar: str = ""  # what --help shows to type after the flag (default: from the kind, workflow/task_options.py)

    @property
    def env_var(self) -> str:
        return "INVOKE_" + self.name.replace(".", "_").upper()


# --------------------------------------------------------------------------- the schema

ABIS = pins.ABIS

KEYS: Tuple[Key, ...] = (
    Key("build_dir", PathKind(), "build", "where every output, record and log goes"),
    Key("debug", Flag(), False, "show tracebacks"),
    Key("json", Flag(), False, "print the results as JSON instead of tables", cli_only=True),
    # ---- all
    Key("all.weights", Text(), "auto", "auto (pretrained when they can be had, else random, announced and "
                                       "recorded), pretrained, random or PATH", metavar="auto|pretrained|random|PATH"),
    Key("all.skip", ListOf(), [], "stages to leave out (repeat or comma-separate)"),
    Key("all.replace_app", Flag(), False, "regenerate the app directory when it was made from other models "
                                          "(replaces your edits)", cli_only=True),
    # ---- convert
    Key("convert.out", PathKind(directory=True), UnderBuildDir(layout.MODELS), "output directory of `invoke convert`"),
    Key("convert.model", Text(), "mobilenet_v2", "torchvision model with a quantizable variant (mobilenet_v2, "
                                                  "resnet18, ...) or path/to/file.py:factory",
        metavar="NAME|FILE.py:FACTORY"),
    Key("convert.quant", ListOf(*MODES, item="quantization mode"), list(MODES), "quantization modes: none, core, full (repeat or "
                                                      "comma-separate); --format executorch: none makes the fp32 "
                                                      "programs, core or full the int8 program",
        metavar="MODE[,MODE...]"),
    Key("convert.weights", Text(), "auto", "auto (pretrained when they can be had, else random, announced and "
                                           "recorded, as `invoke all`) | pretrained | random | PATH to a state_dict "
                                           "(.pth/.pt)", metavar="auto|pretrained|random|PATH"),
    Key("convert.calibration", PathKind(), None, "directory of images to calibrate quantization with "
                                                 "(default: built-in synthetic set)"),
    Key("convert.calibration_count", Int(min=1, max=100000), 32, "calibration images used"),
    Key("convert.quantized_weights", Text(), "calibrate", "quant_core/quant_full weights: calibrate (quantize here "
        "with the calibration images) | pretrained (torchvision's QNNPACK weights, as the tutorial's quantize=True) "
        "| PATH to a quantized state_dict", metavar="calibrate|pretrained|PATH"),
    Key("convert.seed", Int(min=0), 0, "random seed of weights and synthetic inputs"),
    Key("convert.inputs", Text(), None, "a model file's inputs, one DTYPE[1,d1,...] per forward() argument, ';' "
        "between them, each with an optional @LO:HI value range (default: float standard-normal, integers 0 and 1), "
        "e.g. \"int64[1,16]@0:1000;float32[1,1,16000]\"; as <factory>_example_inputs() does (docs/convert.md)",
        metavar="DTYPE[1,...]..."),
    Key("convert.factory_timeout", Num(min=1, max=86400), 600.0, "seconds a model file (--model file.py:factory) may "
        "take to import and build its model before convert reports it instead of waiting"),
    Key("convert.format", ListOf("torchscript", "executorch"), ["torchscript"],
        "model formats: torchscript (PyTorch Mobile) and/or executorch (.pte programs, docs/executorch.md)"),
    Key("convert.executorch_delegates", ListOf("xnnpack", "portable", "vulkan", "qnn", "mediatek", "samsung"),
        ["xnnpack", "portable", "vulkan"],
        "ExecuTorch delegates to lower to (qnn, mediatek, samsung need a vendor SDK: refused with the reason)",
        metavar="DELEGATE[,DELEGATE...]"),
    Key("convert.force", Flag(), False, "rebuild even when the inputs are unchanged", cli_only=True),
    # ---- bench (host)
    Key("bench.warmup", Int(min=0, max=100000), 5, "warm-up iterations"),
    Key("bench.iter", Int(min=1, max=1000000), 50, "timed iterations"),
    Key("bench.threads", Int(min=1, max=1024), 1, "intra-op threads (like --pthreadpool_size)"),
    Key("bench.out", PathKind(), UnderBuildDir(layout.BENCH), "where host benchmark results go"),
    Key("bench.repeat", Int(min=1, max=1000), 3, "timed runs of iter; their medians disagreeing by > 10 % flags "
                                                 "the row unstable"),
    Key("bench.format", ListOf("torchscript", "executorch", item="format"), ["torchscript"],
        "what `invoke bench` times on the host: torchscript (the CPU models) and/or executorch (the .pte programs, "
        "checked against their references and timed beside the legacy models; `invoke bench-executorch` for short)"),
    Key("bench.reference_kernels", Choice("short", "full", "skip"), "short",
        "the reference-kernel lines (the portable .pte, the host NNAPI models, 50x slower than the "
        "rest): short = 3 iterations per round (a rough number), full = the whole protocol, skip = not timed"),
    Key("bench.again", Flag(), False, "measure again even when the programs, models and settings are those of the "
                                      "last results", cli_only=True),
    # ---- pytorch, ndk, android
    Key("pytorch.lane", Choice(*pins.LANES, item="lane"), pins.DEFAULT_LANE, "pin set: " + ", ".join(pins.LANES)),
    Key("pytorch.commit", Text(), None, "build another PyTorch commit: full SHA or tag (lane facts from the "
                                        "nearest preset, with a warning)", metavar="SHA|TAG"),
    Key("pytorch.repo_url", Text(), None, "PyTorch repository to fetch from", metavar="URL"),
    Key("pytorch.source_dir", PathKind(), None, "PyTorch checkout to use (default: <build_dir>/src/pytorch-<sha12>)"),
    Key("pytorch.python", Text(), None, "host Python for PyTorch's build scripts and ExecuTorch's code generators "
                                        "(--lane executorch: needs torch and pyyaml; default: the one running "
                                        "torchdroid)", metavar="PYTHON"),
    Key("pytorch.git_jobs", Int(min=1, max=64), 4, "submodules fetched in parallel"),
    Key("ndk.path", PathKind(), None, "Android NDK directory (else ANDROID_NDK, ANDROID_NDK_HOME, "
                                      "ANDROID_HOME/ndk/*)"),
    Key("android.abi", Choice(*ABIS, item="ABI"), pins.DEFAULT_ABI, "ABI of the runtime build: " + ", ".join(ABIS)),
    Key("android.api_level", Int(min=16, max=99), pins.DEFAULT_API_LEVEL, "Android API level the binary is "
                                                                          "built and checked for", metavar="LEVEL"),
    Key("android.max_jobs", Int(min=1, max=1024), None, "parallel compile jobs (default: all cores)", metavar="N"),
    Key("android.executorch_event_tracer", Flag(), True, "build-android --lane executorch: beside the untraced "
        "runner the timings use, build executor_runner_traced with ExecuTorch's devtools and event tracer "
        "(EXECUTORCH_BUILD_DEVTOOLS, EXECUTORCH_ENABLE_EVENT_TRACER), so deploy-executorch can pull an ETDump and "
        "show where the time went per operator"),
    Key("android.sdk", PathKind(), None, "Android SDK directory (else ANDROID_HOME, ANDROID_SDK_ROOT)"),
    Key("android.java_home", PathKind(), None, "JDK for --aar's Gradle (default: one it accepts, found in "
                                               "JAVA_HOME/PATH/usr/lib/jvm)"),
    Key("build_android.clean", Flag(), False, "start the build over (removes the ABI's CMake tree, build-info "
                                              "and AAR under <build_dir>/android/<abi>)", cli_only=True),
    Key("build_android.aar", Flag(), False, "also build the pytorch_android AAR from the same checkout (needs "
                                            "an Android SDK)", cli_only=True),
    Key("build_android.vulkan", Flag(), False, "keep PyTorch's Vulkan backend (default off: -DUSE_VULKAN=OFF; "
                                               "needs an NDK <= r22 with vulkan_wrapper)", cli_only=True),
    Key("build_android.cmake_args", ListOf(), [], "extra CMake argument for build_android.sh (repeatable)",
        cli_only=True, metavar="ARG"),
    # ---- check-compat, doctor
    Key("compat.build_info", PathKind(), None, "build-info.json of the runtime (default: "
                                               "<build_dir>/android/<abi>/build-info.json)", cli_only=True),
    Key("compat.pytorch_android", Text(), None, "check against a published pytorch_android version instead "
                                                "of a build", cli_only=True, metavar="VERSION"),
    Key("compat.source", PathKind(), None, "PyTorch checkout of that runtime (to compare operators when "
                                           "versions differ)", cli_only=True),
    Key("compat.strict", Flag(), False, "also fail when compatibility cannot be decided", cli_only=True),
    Key("doctor.strict", Flag(), False, "exit non-zero when anything is missing or does not fit the lane",
        cli_only=True),
    # ---- app
    Key("app.out", PathKind(), UnderBuildDir(layout.APP), "where the Gradle project goes (left at the default: "
        "<build_dir>/app for the default --model, <build_dir>/app-<model> for another)"),
    Key("app.name", Text(), "torchdroid demo", "name on the launcher", metavar="NAME"),
    Key("app.application_id", Text(), "org.torchdroid.demo", "Android application id = Java package", metavar="ID"),
    Key("app.abi_filters", ListOf(*ABIS, item="ABI"), ["arm64-v8a"], "ABIs to package (repeat or comma-separate)"),
    Key("app.min_sdk", Int(min=16, max=99), 21, "minSdkVersion (NNAPI needs 29, below it the app uses the CPU "
                                                "model)", metavar="LEVEL"),
    Key("app.target_sdk", Int(min=16, max=99), None, "targetSdkVersion (default: the lane's compileSdk)",
        metavar="LEVEL"),
    Key("app.pytorch_android", Text(), None, "Maven version of org.pytorch:pytorch_android (default: the "
                                             "lane's)", metavar="VERSION"),
    Key("app.model", Text(), "quant_full", "converted variant: quant_none, quant_core, quant_full (or "
                                           "<model>-quant_full); an ExecuTorch program (fp32-xnnpack, "
                                           "int8-xnnpack, fp32-portable, <model>-fp32-xnnpack) makes an app on "
                                           "ExecuTorch's Java API", metavar="VARIANT"),
    Key("app.models", PathKind(directory=True), None, "directory `invoke convert` wrote (default: convert.out)"),
    Key("app.aar", PathKind(), None, "a local pytorch_android AAR (from `invoke build-android --aar`) instead "
                                     "of Maven"),
    Key("app.executorch_android", Text(), None, "Maven version of org.pytorch:executorch-android for an "
                                                "ExecuTorch program's app (default: the exporter's release, "
                                                "toolchain/pins.py; an older one may not load the program)",
        metavar="VERSION"),
    Key("app.executorch_aar", PathKind(), None, "a local ExecuTorch AAR (scripts/build_android_library.sh) "
                                                "instead of Maven, for an ExecuTorch program's app"),
    Key("app.gradle_timeout", Num(min=1), 3600.0, "seconds build-app waits for Gradle"),
    Key("app.force", Flag(), False, "replace a non-empty --out directory", cli_only=True),
    # ---- deploy
    Key("deploy.adb_host", Text(), None, "adb server host (default ANDROID_ADB_SERVER_ADDRESS or 127.0.0.1)",
        metavar="HOST"),
    Key("deploy.adb_port", Int(min=1, max=65535), None, "adb server port (default ANDROID_ADB_SERVER_PORT or "
                                                        "5037)", metavar="PORT"),
    Key("deploy.servers", ListOf(), [], "HOST:PORT of every adb server to deploy through (repeatable: the "
                                        "devices of all of them in parallel; default: the one above)",
        metavar="HOST:PORT[,HOST:PORT...]"),
    Key("deploy.stf.url", Text(), None, "deploy to the phones a DeviceFarmer/STF farm lends (its web address, e.g. "
        "https://stf.example.org; the access token is read from STF_TOKEN only) instead of the adb servers' devices",
        metavar="URL"),
    Key("deploy.stf.count", Int(min=1, max=10000), None, "take at most this many of the farm's phones (default: "
        "every free one that can run the deploy)", metavar="N"),
    Key("deploy.stf.lend", Num(min=60, max=7 * 86400), 3600.0, "seconds the farm lends each phone: it takes "
        "it back by itself after that, also when torchdroid is killed"),
    Key("deploy.format", ListOf("torchscript", "executorch", item="format"), ["torchscript"],
        "what to deploy: torchscript (speed_benchmark_torch, its models, the app) and/or executorch "
        "(executor_runner and the .pte programs), each phone once for all of them"),
    Key("deploy.runner_build_info", PathKind(), None, "build-info.json of ExecuTorch's runner (default "
        "<build_dir>/android/<abi>/executorch/build-info.json of `invoke build-android --lane executorch`)"),
    Key("deploy.device_dir", Text(), "/data/local/tmp/torchdroid", "parent directory on the device", metavar="DIR"),
    Key("deploy.project", Text(), None, "sub-directory name on the device (default: this directory's name)",
        metavar="NAME"),
    Key("deploy.warmup", Int(min=0, max=100000), 5, "warm-up iterations per run"),
    Key("deploy.iter", Int(min=1, max=1000000), 200, "timed iterations per run"),
    Key("deploy.repeat", Int(min=1, max=1000), 3, "runs per model; median/p90/min/spread are over all of them"),
    Key("deploy.threads", Int(min=0, max=1024), 1, "--pthreadpool_size (0 leaves the flag out)"),
    Key("deploy.results", PathKind(directory=True), UnderBuildDir(layout.RESULTS), "results directory: SQLite history + CSV/JSON"),
    Key("deploy.serials", ListOf(), [], "device serials to use (default: ANDROID_SERIAL, else every connected "
                                        "device)"),
    Key("deploy.variants", ListOf(), [], "variants to deploy, e.g. quant_full (default: all)",
        metavar="VARIANT[,VARIANT...]"),
    Key("deploy.build_info", PathKind(), None, "build-info.json of `invoke build-android` (default "
                                               "<build_dir>/android/<abi>/build-info.json)"),
    Key("deploy.binary", PathKind(), None, "speed_benchmark_torch to push instead of the one in the build-info"),
    Key("deploy.app_dir", PathKind(), None, "directory of the generated app (default: app.out)"),
    Key("deploy.apk", PathKind(), None, "APK to install instead of the one `invoke build-app` recorded"),
    Key("deploy.install", Flag(), True, "install the APK (--no-install skips the app entirely)"),
    Key("deploy.bench", Flag(), True, "run the benchmarks (--no-bench only pushes and installs)"),
    Key("deploy.app_bench", Flag(), True, "also run the in-app benchmark via its intent and logcat"),
    Key("deploy.numerics", Flag(), True, "check each model's output on its bundled inputs on every phone against "
        "the host's reference (--no-numerics skips it: one extra run per model and bundled input)"),
    Key("deploy.hardware", Flag(), True, "find which hardware NNAPI chose for each operation on every phone, from "
        "the NNAPI runtime's log (debug.nn.vlog, put back afterwards; --no-hardware skips it: one extra run per "
        "NNAPI model)"),
    Key("deploy.caching_allocator", Flag(), False, "pass --use_caching_allocator=true to CPU models"),
    Key("deploy.bundled_input", Int(min=-1, max=1000), 0, "--use_bundled_input index; -1 passes "
                                                          "--input_dims/--input_type from the manifest",
        metavar="INDEX"),
    Key("deploy.timeout", Num(min=1, max=86400), 120.0, "seconds per adb call"),
    Key("deploy.bench_timeout", Num(min=1, max=86400), 600.0, "seconds per benchmark run"),
    Key("deploy.app_wait", Num(min=1, max=86400), 60.0, "seconds for the app's first progress line (start + "
                                                        "model load); later lines scale with iter"),
    Key("deploy.cooldown", Num(min=0, max=3600), 0.0, "seconds to wait between models so a hot phone cools down"),
    Key("deploy.gatord", PathKind(), None, "PATH to Arm's gatord: push it and run each benchmark under "
                                           "`gatord --app`"),
    Key("deploy.fail_on_numerics", Flag(), False, "exit with code 8 when a phone's outputs differ from the host's "
        "beyond the tolerance (default: the difference is reported and warned about, the exit code stays 0)"),
    Key("deploy.allow_mismatch", Flag(), False, "benchmark even when the models' torch commit differs from "
                                                "the binary's"),
    Key("deploy.report_source", Choice("binary", "app"), "binary", "which rows `invoke report` draws: binary "
                                                                   "(speed_benchmark_torch) or app"),
    Key("report.run", Int(min=1, max=SQLITE_MAX_INT), None, "run id in the results database (default: the latest)", cli_only=True,
        metavar="RUN_ID"),
    Key("report.out", PathKind(), None, "PNG to write (default <results>/report-run-NNNN.png)", cli_only=True),
    # ---- verify (host NNAPI)
    Key("verify.float_atol", Num(min=0), 1e-4, "absolute tolerance of float outputs"),
    Key("verify.float_rtol", Num(min=0), 1e-5, "plus this fraction of the largest reference output magnitude"),
    Key("verify.max_lsb", Int(min=0, max=255), 1, "quantized outputs: allowed difference per NNAPI operation "
                                                  "on the CPU model's values (nnapi rounding)"),
    Key("verify.min_top1_agreement", Num(min=0, max=1), 0.75, "top-1 agreement NNAPI vs CPU needed"),
    Key("verify.min_top5_agreement", Num(min=0, max=1), 0.8, "top-5 agreement NNAPI vs CPU needed"),
    Key("verify.rounding", Choice("qnnpack", "nnapi"), "qnnpack", "quantized kernels: qnnpack (match the CPU "
                                                                  "model) | nnapi (a conformant device's "
                                                                  "arithmetic)"),
    Key("verify.random_inputs", Int(min=0, max=10000), 3, "random inputs besides the bundled ones"),
    Key("verify.seed", Int(min=0), 0, "seed of the random inputs"),
    Key("verify.layerwise", Choice("auto", "always", "never"), "auto", "layer-by-layer comparison: auto "
                                                                       "(quantized variants and failures) | "
                                                                       "always | never"),
    Key("verify.after_convert", Choice("warn", "fail", "off"), "warn", "after `invoke convert`: warn (print a "
                                                                       "failed check) | fail (exit 8) | off"),
    Key("verify.out", PathKind(), None, "results JSON (default: <models>/verify.json)"),
    Key("verify.cache", PathKind(), None, "where the host libneuralnetworks.so is built (default "
                                          "~/.cache/torchdroid/host-nnapi)"),
    Key("verify.variants", ListOf(), [], "variants to check (default: all)", cli_only=True,
        metavar="VARIANT[,VARIANT...]"),
    # ---- clean
    Key("clean.what", ListOf("logs", "outputs", "caches", "results"), ["logs"],
        "what to remove: logs (older than clean.log_days), outputs (models, bench, app, app-<model>, android, all.json), "
        "caches (PyTorch checkouts), results (the benchmark history); repeat or comma-separate",
        metavar="WHAT[,WHAT...]"),
    Key("clean.dry_run", Flag(), False, "list what would be removed, remove nothing", cli_only=True),
    Key("clean.log_days", Num(min=0), 14.0, "`invoke clean` removes logs older than this many days"),
    Key("clean.keep_logs", Int(min=1, max=100000), 50, "logs kept per task; older ones are removed after "
                                                       "each run"),
)

SCHEMA: Dict[str, Key] = {}
for _k in KEYS:
    if _k.name in SCHEMA:  # pragma: no cover - caught by the unit tests at once
        raise RuntimeError(f"config key {_k.name} declared twice")
    SCHEMA[_k.name] = _k
SECTIONS = tuple(sorted({k.name.split(".")[0] for k in KEYS if "." in k.name and not k.cli_only}))


def key(name: str) -> Key:
    return SCHEMA[name]


def default(name: str) -> Any:
    """The declared default of a key (for settings dataclasses that need one for hand-built tests); a path under
    the build directory is joined onto the default build directory (the resolution functions join it onto the one
    in force)."""
    value = SCHEMA[name].default
    if isinstance(value, UnderBuildDir):
        return str(value.under(SCHEMA["build_dir"].default))
    return list(value) if isinstance(value, list) else value


def config_defaults() -> dict:
    """The nested dict handed to ``ns.configure``: every config key with its default, as text (on/off as a bool).

    Invoke casts an ``INVOKE_*`` variable to the type of the value it overrides; over a text it keeps the text
    the user wrote, which :mod:`toolchain.resolve` then types with this schema, naming the variable when it is
    wrong (over a number, ``abc`` would be a traceback in Invoke; over a list, every value would)."""
    tree: dict = {}
    for k in KEYS:
        if k.cli_only:
            continue
        node = tree
        *parents, leaf = k.name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = _as_text(k.default)
    return tree


def _as_text(value: Any) -> Any:
    if value is None or isinstance(value, (bool, UnderBuildDir)):  # <build_dir>/name: joined when read
        return None if isinstance(value, UnderBuildDir) else value
    return ",".join(value) if isinstance(value, list) else str(value)
