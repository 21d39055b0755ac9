"""Hostile command-line input (issue 14): FIFOs, /dev/zero, directories, nan/inf, negative counts
and impossible shards. Every case ends in one `error: ` line with exit code 1 (a file that cannot
be used) or 2 (a usage error: a number out of range, a bad shard), never a hang, never
"internal error" (exit code 3)."""
import dataclasses
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import typer

from acelera.benchmarking import (
    BENCHMARK_RANGES,
    BenchmarkParamError,
    BenchmarkParams,
    BenchmarkRangeError,
    validate_params,
)
from acelera.cli.app import benchmark_flags, build_app, main, parse_shard
from acelera.cli.options import TOOL_RANGES, ranged
from acelera.core.errors import ModelError
from acelera.core.files import CONFIG_MAX_BYTES, FileError, check_model_path, read_regular_file, write_text_file
from acelera.registrar.config import ConfigError, read_table
from acelera.registrar.flags import Flag, FlagValueError
from acelera.registrar.registry import get_registry
from acelera.registrar.spec import COMMON_FLAGS
from acelera.samples import tiny_cnn

TIMEOUT = 60


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("m") / "tiny.tflite"
    p.write_bytes(tiny_cnn())
    return p


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    yield path
    for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):  # free a stuck opener
        try:
            os.close(os.open(path, flags))
        except OSError:
            pass


def run_cli(capsys, *args, registry=None):
    """main(args) in a thread: (exit code, stdout, stderr), or a failure when it hangs."""
    box = {}

    def target():
        try:
            box["code"] = main([str(a) for a in args], registry=registry)
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(TIMEOUT)
    if t.is_alive():
        pytest.fail(f"acelera {' '.join(map(str, args))} did not return within {TIMEOUT} s")
    if "error" in box:
        raise box["error"]
    out = capsys.readouterr()
    return box["code"], out.out, out.err


def one_error_line(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err
    return err


# --- files that are not regular files -------------------------------------------------------------
def bad_path(kind, fifo, tmp_path):
    return {"fifo": fifo, "zero": Path("/dev/zero"), "dir": tmp_path, "missing": tmp_path / "nope"}[kind]


REASONS = {"fifo": "a FIFO (named pipe), not a regular file", "zero": "a character device, not a regular file",
           "dir": "a directory, not a regular file", "missing": "No such file or directory"}

#: command lines taking a file to read; {} is the bad path, MODEL the good model
READERS = [
    ("benchmark", "--graph={}"),
    ("analyze", "{}"),
    ("benchmark", "--graph=MODEL", "--config={}"),
    ("analyze", "MODEL", "--config={}"),
    ("inference-diff", "--model_file={}"),
    ("eval", "image-classification", "--model_file={}"),
    ("eval", "image-classification", "--model_file=MODEL", "--ground_truth_labels={}"),
    ("eval", "object-detection", "--model_file=MODEL", "--ground_truth_json={}"),
    ("conformance", "--delegate", "hexagon", "--tolerances", "{}"),
]


@pytest.mark.parametrize("kind", ["fifo", "zero", "dir", "missing"])
@pytest.mark.parametrize("line", READERS, ids=lambda line: " ".join(line))
def test_unreadable_input_files(capsys, tmp_path, fifo, model, kind, line):
    path = bad_path(kind, fifo, tmp_path)
    args = [a.replace("{}", str(path)).replace("MODEL", str(model)) for a in line]
    code, _, err = run_cli(capsys, *args)
    one_error_line(err)
    assert code == 1 and str(path) in err and REASONS[kind] in err


def test_model_errors_name_the_flag_and_keep_the_loader_wording(capsys, fifo):
    code, _, err = run_cli(capsys, "benchmark", f"--graph={fifo}")
    assert code == 1 and one_error_line(err) == (f"error: --graph: cannot read model file '{fifo}': "
                                                 f"a FIFO (named pipe), not a regular file\n")
    code, _, err = run_cli(capsys, "analyze", "/dev/zero")
    assert code == 1 and one_error_line(err) == ("error: cannot read model file '/dev/zero': "
                                                 "a character device, not a regular file\n")


def test_value_file_of_an_input(capsys, model, fifo):
    for path in (fifo, "/dev/zero"):
        code, _, err = run_cli(capsys, "benchmark", f"--graph={model}", f"--input_layer_value_files=image:{path}",
                               "--num_runs=1", "--warmup_runs=0")
        assert code == 1 and "--input_layer_value_files: failed to read" in one_error_line(err)
        assert str(path) in err and "not a regular file" in err


#: (flag, command line) taking a path to write
WRITERS = [
    ("--svg", ("analyze", "MODEL", "--svg", "{}")),
    ("--result_file_path", ("benchmark", "--graph=MODEL", "--result_file_path={}")),
    ("--output_filepath", ("benchmark", "--graph=MODEL", "--output_filepath={}")),
    ("--op_profiling_output_file", ("benchmark", "--graph=MODEL", "--enable_op_profiling",
                                    "--op_profiling_output_file={}")),
    ("--output_file_path", ("inference-diff", "--model_file=MODEL", "--output_file_path={}")),
    ("--output_file_path", ("eval", "image-classification", "--model_file=MODEL", "--output_file_path={}")),
]


@pytest.mark.parametrize("kind", ["fifo", "dir"])
@pytest.mark.parametrize("flag, line", WRITERS, ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_unwritable_output_paths(capsys, tmp_path, fifo, model, kind, flag, line):
    path = bad_path(kind, fifo, tmp_path)
    args = [a.replace("{}", str(path)).replace("MODEL", str(model)) for a in line]
    code, _, err = run_cli(capsys, *args)
    one_error_line(err)
    assert code == 1 and f"{flag}: cannot write '{path}'" in err and "not a regular file" in err


def test_svg_into_a_directory_that_does_not_exist(capsys, tmp_path, model):
    target = tmp_path / "no" / "g.svg"
    code, _, err = run_cli(capsys, "analyze", model, "--svg", target)
    assert code == 1 and f"its directory {target.parent} does not exist" in one_error_line(err)


def test_svg_still_written(capsys, tmp_path, model):
    target = tmp_path / "g.svg"
    target.write_text("old and longer than nothing" * 1000)
    code, out, _ = run_cli(capsys, "analyze", model, "--svg", target)
    text = target.read_text()
    assert code == 0 and "<svg" in text and text.rstrip().endswith("</svg>")


@pytest.mark.parametrize("line, reason", [
    (("conformance", "--delegate", "hexagon", "--models", "MODEL"), "--models: cannot use directory"),
    (("conformance", "--delegate", "hexagon", "--report", "MODEL"), "--report: cannot use directory"),
    (("conformance", "--delegate", "hexagon", "--models", "/dev/zero"), "a character device, not a directory"),
    (("new-delegate", "x", "--dir", "MODEL"), "--dir: cannot use directory"),
    (("eval", "object-detection", "--model_file=MODEL", "--ground_truth_images_path=MODEL"),
     "--ground_truth_images_path: cannot use directory"),
])
def test_directory_flags(capsys, model, line, reason):
    code, _, err = run_cli(capsys, *[a.replace("MODEL", str(model)) for a in line])
    assert code == 1 and reason in one_error_line(err)


@pytest.mark.parametrize("line", [
    ("benchmark", "--graph=MODEL", "--external_delegate_path={}"),
    ("analyze", "MODEL", "--external_delegate_path={}"),
    ("conformance", "--external_delegate_path={}"),
    ("inference-diff", "--model_file=MODEL", "--external_delegate_path={}"),
    ("benchmark", "--graph=MODEL", "--use_xnnpack", "--xnnpack_weight_cache_file_path={}"),
], ids=lambda line: " ".join(line))
def test_delegate_path_flags(capsys, fifo, model, line):
    code, _, err = run_cli(capsys, *[a.replace("{}", str(fifo)).replace("MODEL", str(model)) for a in line])
    flag = line[-1].split("=")[0]
    assert code == 1 and one_error_line(err).startswith(f"error: {flag}: cannot ")
    assert f"'{fifo}': a FIFO (named pipe), not a regular file" in err


def test_serialize_dir_must_be_a_directory(capsys, model):
    code, _, err = run_cli(capsys, "benchmark", f"--graph={model}", f"--delegate_serialize_dir={model}",
                           "--delegate_serialize_token=t")
    assert code == 1 and "--delegate_serialize_dir: cannot use directory" in one_error_line(err)


def test_a_bare_library_name_is_left_to_the_loader():
    from acelera.cli.options import path_problem
    assert path_problem("libedgetpu.so.1", "library") is None
    assert path_problem("/no/such/libx.so", "library") == ("cannot read library", "No such file or directory")


# --- numbers --------------------------------------------------------------------------------------
def test_the_reported_cases(capsys, model, tmp_path):
    cases = [
        (("benchmark", f"--graph={model}", "--max_secs=nan"),
         "error: --max_secs: nan is out of range (allowed: [0, 31536000])\n"),
        (("benchmark", f"--graph={model}", "--min_secs=-1e308"),
         "error: --min_secs: -1e+308 is out of range (allowed: [-1, 31536000])\n"),
        (("benchmark", f"--graph={model}", "--num_runs=-1"),
         "error: --num_runs: -1 is out of range (allowed: [0, 2147483647])\n"),
        (("benchmark", f"--graph={model}", "--num_runs", "-1"),
         "error: --num_runs: -1 is out of range (allowed: [0, 2147483647])\n"),
        (("conformance", "--delegate", "hexagon", "--shard", "3/2"),
         "error: Invalid value for '--shard': 3/2 is out of range (allowed: i/n with 0 <= i < n <= 2147483647)\n"),
        (("conformance", "--delegate", "hexagon", "--seed", "-1"),
         "error: Invalid value for '--seed': -1 is out of range (allowed: [0, 4294967295])\n"),
        (("inference-diff", f"--model_file={model}", "--num_runs=0"),
         "error: --num_runs: 0 is out of range (allowed: [1, 2147483647])\n"),
        (("analyze", model, "--num_threads=-2"),
         "error: --num_threads: -2 is out of range (allowed: [-1, 2147483647])\n"),
    ]
    for args, want in cases:
        code, _, err = run_cli(capsys, *args)
        assert (code, err) == (2, want), args


@pytest.mark.parametrize("shard", ["3/2", "2/2", "-1/2", "0/0", "1/-1", "x", "1", "1/2/3", "a/b", "0/99999999999"])
def test_bad_shards(capsys, shard):
    code, _, err = run_cli(capsys, "conformance", "--delegate", "hexagon", "--shard", shard)
    assert code == 2 and one_error_line(err).startswith("error: Invalid value for '--shard': ")


def test_parse_shard():
    assert parse_shard("0/1") == (0, 1) and parse_shard(" 3 / 4 ") == (3, 4)
    with pytest.raises(typer.BadParameter):
        parse_shard("4/4")


def numeric_options():
    """(command path, option name, metavar) of every INT32/FLOAT option of every command; the
    registrar's and the plugins' shared flags once (on analyze), each tool's own on its command."""
    reg = get_registry()
    shared = set(reg.flagset.flags)
    root = typer.main.get_command(build_app(reg))
    found = []

    def walk(group, path):
        for name, cmd in sorted(group.commands.items()):
            if hasattr(cmd, "commands"):
                walk(cmd, path + (name,))
                continue
            for p in cmd.params:
                if getattr(p, "metavar", None) in ("INT32", "FLOAT"):
                    if p.name in shared and path + (name,) != ("analyze",):
                        continue
                    found.append((path + (name,), p.name, p.metavar))
    walk(root, ())
    return found


NUMERIC = numeric_options()
#: what each command needs besides the flag under test (MODEL: a good model, OUT: a directory)
BASE_ARGS = {("analyze",): ("MODEL",), ("coreml-export",): ("MODEL", "--out", "OUT")}
BAD = {"INT32": ("2147483648", "-2147483649", "1.5"), "FLOAT": ("nan", "inf", "-1e999")}


def test_every_tool_has_numeric_flags_covered():
    commands = {c for c, _, _ in NUMERIC}
    assert {("benchmark",), ("analyze",), ("inference-diff",), ("eval", "image-classification"),
            ("eval", "object-detection")} <= commands
    names = {n for _, n, _ in NUMERIC}
    assert {"num_runs", "max_secs", "num_threads", "num_images", "class_offset", "nnapi_android_sdk"} <= names


@pytest.mark.parametrize("command, name, metavar", NUMERIC, ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_every_numeric_flag_refuses_out_of_range_values(capsys, tmp_path, model, command, name, metavar):
    base = [a.replace("MODEL", str(model)).replace("OUT", str(tmp_path)) for a in BASE_ARGS.get(command, ())]
    for value in BAD[metavar]:
        code, _, err = run_cli(capsys, *command, *base, f"--{name}={value}")
        one_error_line(err)
        assert code == 2 and err.startswith(f"error: --{name}: "), (value, err)
        assert "out of range (allowed: " in err or "expected an integer (" in err, (value, err)


def ranged_flags():
    bench = [f for f in benchmark_flags() if f.name in BENCHMARK_RANGES]
    tools = [ranged(Flag(n, t, d), TOOL_RANGES[tool]) for tool in TOOL_RANGES
             for n, (t, d) in {"num_runs": (int, 50), "num_interpreter_threads": (int, 1), "num_images": (int, 0),
                               "class_offset": (int, 1)}.items() if n in TOOL_RANGES[tool]]
    return [f for f in COMMON_FLAGS if f.bounds() is not None] + bench + tools


@pytest.mark.parametrize("flag", ranged_flags(), ids=lambda f: f.name)
def test_bounds_are_inclusive_and_defaults_inside(flag):
    low, high = flag.bounds()
    assert flag.check_range(flag.default) == flag.default
    assert flag.parse(str(low)) == low and flag.parse(str(high)) == high
    step = 1 if flag.type is int else max(1e-3, abs(high) * 1e-6)
    for outside in (low - step, high + step):
        with pytest.raises(FlagValueError, match=rf"^--{flag.name}: .* is out of range \(allowed: \[.*\]\)$"):
            flag.parse(str(outside))
    if flag.type is float:
        for value in ("nan", "inf", "-inf", "1e999"):
            with pytest.raises(FlagValueError, match="out of range"):
                flag.parse(value)


def test_unbounded_flags_are_int32_or_finite():
    i = Flag("level", int, 0)
    assert i.parse("2147483647") == 2147483647 and i.parse("-2147483648") == -2147483648
    with pytest.raises(FlagValueError, match=r"allowed: \[-2147483648, 2147483647\]"):
        i.parse("2147483648")
    f = Flag("ratio", float, 0.0)
    assert f.parse("-1e308") == -1e308
    with pytest.raises(FlagValueError, match=r"^--ratio: nan is out of range \(allowed: any finite number\)$"):
        f.parse("nan")
    with pytest.raises(FlagValueError, match="expected an integer"):
        i.parse("9" * 5000)


def test_a_plugin_flag_default_outside_its_range_breaks_the_plugin():
    from plugin_helpers import EP, plugin

    from acelera.registrar.registry import Registry
    bad = Flag("bad_level", int, 7, "", "bad", minimum=0, maximum=3)
    reg = Registry([EP("bad", plugin("bad", flags=(bad,)))])
    assert "bad" not in reg.specs and "--bad_level: 7 is out of range" in reg.broken["bad"]


def test_config_values_are_range_checked(capsys, tmp_path, model):
    cfg = tmp_path / "bench.toml"
    for text, want in (("max_secs = nan", "--max_secs: nan is out of range"),
                       ("num_runs = -1", "--num_runs: -1 is out of range"),
                       ("min_secs = -inf", "--min_secs: -inf is out of range")):
        cfg.write_text(text + "\n")
        code, _, err = run_cli(capsys, "benchmark", f"--graph={model}", f"--config={cfg}")
        assert code == 2 and want in one_error_line(err) and str(cfg) in err


def test_config_files(tmp_path, fifo):
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * (CONFIG_MAX_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match=r"over the 1 MiB limit"):
        read_table(big, False)
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100000 + "]" * 100000 + "\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        read_table(deep, False)
    with pytest.raises(ConfigError, match="a FIFO"):
        read_table(fifo, False)
    ok = tmp_path / "ok.toml"
    ok.write_text("[tool.acelera]\nnum_runs = 3\n")
    assert read_table(ok, True) == {"num_runs": 3}


def test_engine_validates_numbers_too(tmp_path):
    base = dict(graph="m.tflite")
    for field, value in (("max_secs", math.nan), ("min_secs", -1e308), ("num_runs", -1), ("warmup_runs", -5),
                         ("run_delay", math.inf), ("num_threads", -7), ("run_frequency", 1e-300)):
        with pytest.raises(BenchmarkRangeError, match=rf"^--{field}: "):
            validate_params(BenchmarkParams(**{**base, field: value}), print)
    assert issubclass(BenchmarkRangeError, BenchmarkParamError) and BenchmarkRangeError.exit_code == 2
    with pytest.raises(BenchmarkParamError, match="--result_file_path: cannot write"):
        validate_params(BenchmarkParams(graph="m.tflite", result_file_path=str(tmp_path)), print)
    # TFLite's own values still pass: dry runs use -1 seconds, 0 means no delay / no frequency
    validate_params(BenchmarkParams(graph="m.tflite", min_secs=-1.0, warmup_min_secs=-1.0, run_frequency=0.0,
                                    num_runs=0, result_file_path="/dev/null"), print)
    defaults = BenchmarkParams(graph="m.tflite")
    assert all(BENCHMARK_RANGES[f][0] <= getattr(defaults, f) <= BENCHMARK_RANGES[f][1] for f in BENCHMARK_RANGES)
    assert set(BENCHMARK_RANGES) == {f.name for f in dataclasses.fields(BenchmarkParams)
                                     if f.type in (int, float, "int", "float")}


# --- the file helpers -----------------------------------------------------------------------------
def test_read_regular_file(tmp_path, fifo):
    p = tmp_path / "data.bin"
    p.write_bytes(b"x" * 100)
    assert read_regular_file(p, 100) == b"x" * 100
    with pytest.raises(FileError, match=r"^cannot read file '.*data.bin': 100 bytes, over the 99 bytes limit$"):
        read_regular_file(p, 99)
    for path, reason in ((fifo, "a FIFO"), ("/dev/zero", "a character device"), (tmp_path, "a directory"),
                         (tmp_path / "nope", "No such file or directory")):
        with pytest.raises(FileError, match=reason):
            read_regular_file(path, 1 << 20)
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    with pytest.raises(FileError, match="a character device"):
        read_regular_file(link, 1 << 20)


def test_check_model_path(tmp_path, fifo, model):
    assert check_model_path(model) == str(model)
    with pytest.raises(ModelError, match=r"^--graph: cannot read model file '.*pipe': a FIFO"):
        check_model_path(fifo, "graph")
    sparse = tmp_path / "huge.tflite"
    with open(sparse, "wb") as f:  # a sparse file: no disk space used
        f.truncate((2 << 30) + 1)
    with pytest.raises(ModelError, match=r"2 GiB, over the 2 GiB limit"):
        check_model_path(sparse)


def test_write_text_file(tmp_path, fifo):
    out = tmp_path / "o.txt"
    write_text_file(out, "long text " * 100)
    write_text_file(out, "short")
    assert out.read_text() == "short"
    write_text_file("/dev/null", "discarded")
    for path, reason in ((fifo, "a FIFO"), (tmp_path, "a directory")):
        with pytest.raises(FileError, match=reason):
            write_text_file(path, "x")


# --- the real command, as a subprocess ------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ("benchmark", "--graph={fifo}"),
    ("benchmark", "--graph=/dev/zero"),
    ("analyze", "{model}", "--config=/dev/zero"),
    ("analyze", "{model}", "--svg={dir}"),
    ("benchmark", "--graph={model}", "--max_secs=nan"),
], ids=lambda a: " ".join(a))
def test_subprocess_never_hangs(tmp_path, fifo, model, args):
    argv = [a.format(fifo=fifo, model=model, dir=tmp_path) for a in args]
    res = subprocess.run([sys.executable, "-m", "acelera", *argv], capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode in (1, 2) and res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert "internal error" not in res.stderr
