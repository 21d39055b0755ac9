"""gpu-opencl's device probe on a fake OpenCL driver (runs without OpenCL): every device of every
platform is probed by building and running a kernel, a real GPU is preferred, then any device
that works; each rejected device is reported in one short line; --gpu_opencl_device still
picks one explicitly."""
from __future__ import annotations

import re
import types

import pytest

from acelera.plugins.gpu_opencl import device as gdev

#: what pyopencl raises on an AVX-512 AMD EPYC with pip's PoCL 3.0 (LLVM 14), as reported
EPYC_BUILD_ERROR = (
    "clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed: BUILD_PROGRAM_FAILURE - "
    "clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\nBuild on <pyopencl.Device 'pthread-AMD EPYC 9R14 "
    "96-Core Processor' on 'Portable Computing Language' at 0x55d0c4a1b2c0>:\n\nerror: unknown target CPU "
    "'generic'\nnote: valid target CPU values are: nocona, core2, penryn, bonnell, atom, silvermont, slm, "
    "goldmont, goldmont-plus, tremont, nehalem, corei7, westmere, sandybridge, znver3, x86-64\n\n"
    "(options: -I /venv/lib/python3.11/site-packages/pyopencl/cl)")

CPU, GPU, ACCELERATOR = 2, 4, 8


class FakeError(Exception):
    pass


class FakeDevice:
    def __init__(self, name: str, kind: int, driver: str, behaviour: str = "ok"):
        self.name, self.type, self.driver_version, self.behaviour = name, kind, driver, behaviour
        self.version, self.extensions, self.max_work_group_size = "OpenCL 3.0", "", 256
        self.platform = None


class FakePlatform:
    def __init__(self, name: str, devices: list[FakeDevice]):
        self.name, self.version, self._devices = name, f"OpenCL 3.0 {name}", devices
        for d in devices:
            d.platform = self

    def get_devices(self):
        return self._devices


class Context:
    def __init__(self, devices):
        self.device = devices[0]
        if self.device.behaviour == "no-context":
            raise FakeError("clCreateContext failed: DEVICE_NOT_AVAILABLE - clCreateContext failed: "
                            "DEVICE_NOT_AVAILABLE")


class CommandQueue:
    def __init__(self, ctx):
        self.ctx = ctx

    def finish(self):
        pass


class Program:
    def __init__(self, ctx, source):
        self.ctx = ctx

    def build(self, options=None):
        if self.ctx.device.behaviour == "build":
            raise FakeError(EPYC_BUILD_ERROR)
        return self

    def probe(self, queue, global_size, local_size, buf):
        buf.data *= 0 if self.ctx.device.behaviour == "wrong" else 2


class Buffer:
    def __init__(self, ctx, flags, hostbuf=None):
        self.data = hostbuf.copy()


def fake_cl(*platforms: FakePlatform):
    def enqueue_copy(queue, dst, src):
        dst[...] = src.data

    return types.SimpleNamespace(
        get_platforms=lambda: list(platforms), Context=Context, CommandQueue=CommandQueue, Program=Program,
        Buffer=Buffer, enqueue_copy=enqueue_copy, mem_flags=types.SimpleNamespace(READ_WRITE=1, COPY_HOST_PTR=2),
        device_type=types.SimpleNamespace(CPU=CPU, GPU=GPU, ACCELERATOR=ACCELERATOR))


@pytest.fixture
def driver(monkeypatch):
    """Install a fake pyopencl with the given platforms; the probe state starts empty."""
    def install(*platforms):
        cl = fake_cl(*platforms)
        monkeypatch.setattr(gdev, "_import_cl", lambda: cl)
        monkeypatch.setattr(gdev, "_devices", {})
        monkeypatch.setattr(gdev, "_candidates", None)
        monkeypatch.setattr(gdev, "_probe", None)
        monkeypatch.delenv(gdev.ENV_DEVICE, raising=False)
        return cl
    return install


def pip_pocl(behaviour="build"):
    return FakePlatform("Portable Computing Language", [
        FakeDevice("pthread-AMD EPYC 9R14 96-Core Processor", CPU, "3.0-rc2", behaviour)])


def debian_pocl(behaviour="ok"):
    return FakePlatform("Portable Computing Language", [
        FakeDevice("pthread-znver4-AMD EPYC 9R14 96-Core Processor", CPU, "3.1+debian", behaviour)])


def nvidia(behaviour="ok"):
    return FakePlatform("NVIDIA CUDA", [FakeDevice("NVIDIA H100 80GB HBM3", GPU, "550.54.15", behaviour)])


def assert_short_line(line: str):
    assert "\n" not in line and len(line) <= 200, line
    assert not re.search(r"0x[0-9a-f]{6,}", line), line  # no pointer addresses
    assert line.count("failed:") <= 1, line  # pyopencl's "clX failed: CODE" not repeated
    assert "note:" not in line and "options:" not in line, line


def test_device_that_cannot_build_is_rejected_in_one_short_line(driver):
    driver(debian_pocl(), pip_pocl("build"))
    s = gdev.probe()
    assert s.ok
    label, *rejected = s.reason.splitlines()
    assert label == "0:0 Portable Computing Language 3.1+debian / pthread-znver4-AMD EPYC 9R14 96-Core Processor"
    assert rejected == ["rejected 1:0 Portable Computing Language 3.0-rc2 / pthread-AMD EPYC 9R14 96-Core "
                        "Processor: kernel build failed: unknown target CPU 'generic'"]
    assert_short_line(rejected[0])
    assert gdev.open_device().label == label


def test_working_device_on_a_later_platform_is_found(driver):
    """The broken driver listed first (as pip's PoCL would be on its own) does not hide a working one."""
    driver(pip_pocl("build"), debian_pocl())
    s = gdev.probe()
    assert s.ok and s.reason.startswith("1:0 ") and gdev.open_device().label.startswith("1:0 ")
    assert gdev.rejected() and gdev.rejected()[0].startswith("0:0 ")


def test_real_gpu_preferred_over_a_working_cpu(driver):
    driver(debian_pocl(), nvidia())
    assert gdev.probe().reason == "1:0 NVIDIA CUDA 550.54.15 / NVIDIA H100 80GB HBM3"
    assert gdev.open_device().is_gpu


@pytest.mark.parametrize("behaviour, why", [
    ("build", "kernel build failed: unknown target CPU 'generic'"),
    ("wrong", "the probe kernel computed [0.0, 0.0, 0.0, 0.0], not [0, 2, 4, 6]"),
    ("no-context", "clCreateContext failed: DEVICE_NOT_AVAILABLE"),
])
def test_broken_gpu_falls_back_to_a_working_cpu(driver, behaviour, why):
    driver(nvidia(behaviour), debian_pocl())
    s = gdev.probe()
    assert s.ok and s.reason.splitlines()[0].startswith("1:0 Portable Computing Language")
    assert s.reason.splitlines()[1] == f"rejected 0:0 NVIDIA CUDA 550.54.15 / NVIDIA H100 80GB HBM3: {why}"


def test_no_working_device_is_unavailable_with_one_line_per_device(driver):
    driver(pip_pocl("build"), nvidia("no-context"))
    s = gdev.probe()
    assert not s.ok
    head, *lines = s.reason.splitlines()
    assert head.startswith("no OpenCL device builds and runs kernels; install an OpenCL driver")
    assert "pocl-opencl-icd" in head and "[" not in head  # no rich markup in `delegates list`
    assert [ln.split(":")[0] for ln in lines] == ["0", "1"]  # in the loader's order
    for ln in lines:
        assert_short_line(ln)
    with pytest.raises(gdev.DeviceError, match="no OpenCL device builds and runs kernels"):
        gdev.open_device()


def test_explicit_device_is_still_chosen(driver, monkeypatch):
    driver(debian_pocl(), nvidia(), pip_pocl("ok"))
    assert gdev.open_device("0:0").label.startswith("0:0 ")  # a CPU although a GPU is preferred
    assert gdev.open_device("3.0-rc2").label.startswith("2:0 ")  # a substring of the label
    assert gdev.open_device("portable computing language pthread-znver4").label.startswith("0:0 ")
    monkeypatch.setenv(gdev.ENV_DEVICE, "2:0")
    assert gdev.probe().reason.startswith("2:0 ")
    with pytest.raises(gdev.DeviceError, match=r"no OpenCL device matches '9:9' \(devices: 0:0 .*; 2:0 "):
        gdev.open_device("9:9")


def test_explicit_device_that_cannot_build_is_refused_with_the_reason(driver):
    from acelera.plugins import gpu_opencl
    from acelera.registrar.registry import RegistryError

    driver(debian_pocl(), pip_pocl("build"))
    with pytest.raises(RegistryError) as e:
        gpu_opencl.create({"gpu_opencl_device": "1:0"})
    assert str(e.value) == ("gpu-opencl: OpenCL device 1:0 Portable Computing Language 3.0-rc2 / pthread-AMD EPYC "
                            "9R14 96-Core Processor: kernel build failed: unknown target CPU 'generic'")


def test_no_platform(driver):
    cl = driver()

    def none():
        raise FakeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR - clGetPlatformIDs failed: "
                        "PLATFORM_NOT_FOUND_KHR")
    cl.get_platforms = none
    s = gdev.probe()
    assert not s.ok and s.reason.startswith("no OpenCL platform found (clGetPlatformIDs failed: "
                                            "PLATFORM_NOT_FOUND_KHR); install an OpenCL driver")


def test_short_reason_cuts_at_a_word():
    long = "error: " + " ".join(f"word{i}" for i in range(60))
    r = gdev.short_reason(FakeError(long))
    assert len(r) <= gdev.REASON_CHARS + 4 and r.endswith(" ...") and re.fullmatch(r".* word\d+ \.\.\.", r)
    r = gdev.short_reason(FakeError("error: /root/.cache/pocl/kcache/tempfile_Ab12.cl:1:43: implicit "
                                    "declaration of function 'f' is invalid in OpenCL\n1 error generated."))
    assert r == "kernel build failed: implicit declaration of function 'f' is invalid in OpenCL"
    r = gdev.short_reason(FakeError(
        "clBuildProgram failed: INVALID_BUILD_OPTIONS - clBuildProgram failed: INVALID_BUILD_OPTIONS\n\nBuild on "
        "<pyopencl.Device 'cpu' at 0x5607472357b0>:\n\nInvalid build option: -mcpu=x\n\n(options: -mcpu=x)"))
    assert r == "clBuildProgram failed: INVALID_BUILD_OPTIONS: Invalid build option: -mcpu=x"
    assert gdev.short_reason(FakeError("")) == "FakeError"
