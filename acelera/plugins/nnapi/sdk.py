"""Android API levels and NNAPI feature levels, as TFLite's NNAPI delegate names them.

`--nnapi_android_sdk` is the Android API level of the emulated phone (default 30: Android 11,
NNAPI 1.3). TFLite compares op requirements with a *target level*:

- below 27 there is no NNAPI: the delegate takes nothing;
- with no target devices (API < 29, or `--disable_nnapi_cpu=false` and no accelerator name)
  the target level is the API level itself;
- with target devices (an accelerator name, or `--disable_nnapi_cpu=true` on API >= 29) it is
  the runtime feature level, lowered to the highest feature level of the chosen devices
  (`GetTargetFeatureLevel` in nnapi_delegate.cc).

The runtime feature level equals the API level up to 30; Android 12/12L (31, 32) are feature
level 5 (31), Android 13 (33) feature level 6 (1000006), 14 (34) FL7, 15 and later (35+) FL8.
"""
from __future__ import annotations

NNAPI_1_0, NNAPI_1_1, NNAPI_1_2, NNAPI_1_3 = 27, 28, 29, 30
FL5, FL6, FL7, FL8 = 31, 1000006, 1000007, 1000008
MIN_SDK = NNAPI_1_0
DEFAULT_SDK = NNAPI_1_3

_FL_API = {FL6: 33, FL7: 34, FL8: 35}


def runtime_feature_level(sdk: int) -> int:
    """The NNAPI runtime feature level of an Android API level."""
    if sdk <= NNAPI_1_3:
        return sdk
    if sdk <= 32:
        return FL5
    return {33: FL6, 34: FL7}.get(sdk, FL8)


def level_name(level: int) -> str:
    """'Android SDK 28' or 'NNAPI feature level 6 (Android SDK 33)'."""
    if level in _FL_API:
        return f"NNAPI feature level {level - 1000000} (Android SDK {_FL_API[level]})"
    return f"Android SDK {level}"


def nnapi_version(level: int) -> str:
    names = {27: "NNAPI 1.0", 28: "NNAPI 1.1", 29: "NNAPI 1.2", 30: "NNAPI 1.3", 31: "NNAPI feature level 5"}
    if level in _FL_API:
        return f"NNAPI feature level {level - 1000000}"
    return names.get(level, f"API level {level}")
