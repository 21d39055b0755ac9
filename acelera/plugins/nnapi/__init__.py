"""nnapi: TFLite's Android NNAPI delegate, its support rules exact, on emulated NNAPI devices.

Modules: `sdk` (API and feature levels), `rules` (TFLite's per-op Validate rules), `table`
(the op table for one target level and device set), `devices` (the emulated device
catalogue), `delegate` (option handling, device choice, the delegate and its runner).

The declared op table is the one the default flags give: Android SDK 30 (NNAPI 1.3), targets
emu-gpu-fp16 and emu-dsp-int8 (disable_nnapi_cpu=true excludes nnapi-reference). Other flags
give the delegate its own table (`NnapiDelegate.op_table`), e.g. `--nnapi_android_sdk=27`.
"""
from acelera.core.delegate import Support
from acelera.plugins.nnapi.delegate import DEFAULT_MAX_PARTITIONS, NnapiDelegate, resolve
from acelera.plugins.nnapi.devices import CATALOGUE
from acelera.plugins.nnapi.sdk import DEFAULT_SDK
from acelera.plugins.nnapi.table import build_table
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

G = "NNAPI delegate (emulated)"
_DEVICES = ", ".join(CATALOGUE)
FLAGS = (
    Flag("use_nnapi", bool, False, "Enable the NNAPI delegate (emulated NNAPI devices)", "nnapi", G),
    Flag("nnapi_execution_preference", str, "",
         "fast_single_answer / sustained_speed / low_power / undefined; empty = NNAPI's default "
         "(fast_single_answer); unknown values warn and mean undefined. low_power places ops by power usage",
         "nnapi", G),
    Flag("nnapi_execution_priority", str, "",
         "default / low / medium / high (Android 11+); unknown values warn and mean default", "nnapi", G),
    Flag("nnapi_accelerator_name", str, "",
         f"The NNAPI device to target (Android 10+): one of {_DEVICES}; if set, --disable_nnapi_cpu is ignored",
         "nnapi", G),
    Flag("disable_nnapi_cpu", bool, True, "Exclude the nnapi-reference CPU device (Android 10+)", "nnapi", G),
    Flag("nnapi_allow_fp16", bool, False,
         "Let fp32 run as fp16 (relaxed computation: nnapi-reference computes in fp16)", "nnapi", G),
    Flag("nnapi_allow_dynamic_dimensions", bool, False,
         "Allow dynamic dimensions without recompiling (accepted; the emulation re-prepares on resize either way)",
         "nnapi", G),
    Flag("nnapi_use_burst_mode", bool, False, "Use NNAPI burst executions (accepted; no effect on results)",
         "nnapi", G),
    Flag("nnapi_support_library_path", str, "",
         "Load the NNAPI Support Library from this path (Android only: the emulated devices refuse it "
         "with an error)", "nnapi", G),
    Flag("nnapi_android_sdk", int, DEFAULT_SDK,
         f"Android API level whose NNAPI rules are emulated (default {DEFAULT_SDK}: Android 11, NNAPI 1.3; "
         "27 = NNAPI 1.0 ... 35 = feature level 8; below 27 NNAPI takes nothing)", "nnapi", G),
)

_DEFAULT = resolve({})
SPEC = DelegateSpec(
    name="nnapi", summary="Android NNAPI delegate: TFLite's support rules by Android SDK level, emulated devices",
    version="0.2.0", flags=FLAGS, enabled_by=("use_nnapi",),
    op_table=build_table(_DEFAULT.target, _DEFAULT.filter),
    model_types=frozenset({"float32", "float16", "dynamic-range", "full-integer", "qat"}), backend="emulated",
    probe=lambda: Support(True), factory=NnapiDelegate,
    # the tools' max_delegated_partitions=0 means "no limit" for NNAPI (TFLite's provider copies
    # values >= 0); NNAPI's own default of 3 applies to a negative value or to NnapiDelegate()
    default_max_partitions=0, default_min_nodes=0,
    precision={"float": "float16", "integer": "integer"}, fp16_weights_aware=True,
    notes=(f"Devices: {_DEVICES} (emulated). NNAPI's own partition default is {DEFAULT_MAX_PARTITIONS}; "
           "the tools' --max_delegated_partitions=0 means no limit. --min_nodes_per_partition is ignored, "
           "as in TFLite."))


@hookimpl
def register_delegates(register):
    register(SPEC)
