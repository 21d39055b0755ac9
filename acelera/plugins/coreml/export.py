"""Write each partition the Core ML delegate takes as a Core ML model package.

    export_model("model.tflite", "out/", {"coreml_version": 3}) -> [Path("out/partition_0.mlpackage"), ...]

Needs coremltools (`pip install 'acelera[coreml]'`); without it `export_model` raises
CoreMLExportError saying so. The delegate's partitions are planned exactly as `--use_coreml`
plans them (same rules, same limits), then each is translated op by op into a Core ML ML
Program (MIL) and saved with float16 compute precision, the Neural Engine's arithmetic:

- tensors keep TFLite's NHWC layout; spatial ops (convolutions, pooling, bilinear resize) are
  wrapped in NHWC<->NCHW transposes, which Core ML's optimizer cancels between layers;
- padding is explicit, computed with TFLite's rules, so SAME means what TFLite means;
- fused activations become separate activation ops;
- weights come from the model's constants (float16 weights behind DEQUANTIZE included).

`out_dir/manifest.json` maps every package's Core ML feature names to the TFLite tensors
(index and name) at the partition boundary, so a runtime can wire the packages back into the
graph. The TFLite delegate itself builds Core ML 2/3 *NeuralNetwork* specs in memory; the
packages here use the newer ML Program format (iOS 15 / macOS 12 and later), which is what
Xcode and coremltools work with today. `fmt="neuralnetwork"` writes Core ML 3 NeuralNetwork
`.mlmodel` files instead (float32 weights, computed in whatever precision the device picks).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

import numpy as np

from acelera.core.delegate import Partition
from acelera.core.errors import AceleraError

# TFLite schema enums
SAME = 0
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH = 0, 1, 2, 3, 4
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]
FORMATS = ("mlprogram", "neuralnetwork")


class CoreMLExportError(AceleraError):
    """coremltools is missing, or a partition cannot be written as a Core ML model."""


def require_coremltools() -> ModuleType:
    """The coremltools module, or CoreMLExportError saying how to install it."""
    import logging

    quiet = logging.getLogger("coremltools")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # off macOS it warns that its runtime proxies cannot load
    try:
        import coremltools
        from coremltools.converters.mil.mil import Builder  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        raise CoreMLExportError(
            f"Core ML export needs coremltools, which is not importable here ({type(e).__name__}: {e}); "
            f"install it with: pip install 'acelera[coreml]' (or pip install coremltools)") from None
    finally:
        quiet.setLevel(level)
    return coremltools


def feature_name(name: str, taken: set[str]) -> str:
    """A Core ML feature name (identifier-like, unique) for a TFLite tensor name."""
    base = re.sub(r"\W", "_", name) or "tensor"
    if base[0].isdigit():
        base = "t_" + base
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


def _same_pads(size: int, k: int, s: int, d: int, out: int) -> tuple[int, int]:
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


class _Translator:
    """Builds one partition's MIL ops inside an open mil.Function."""

    def __init__(self, mb, partition: Partition, values: dict[int, Any]):
        self.mb = mb
        self.p = partition
        self.v = values  # tensor index -> MIL var or numpy constant

    def val(self, ctx, i: int):
        t = ctx.op.inputs[i]
        if t in self.v:
            return self.v[t]
        data = ctx.const(i)
        if data is None:
            raise CoreMLExportError(f"node {ctx.index} ({ctx.op.name}): input #{i} (tensor {t}) has no value")
        return np.asarray(data, np.float32) if data.dtype == np.float16 else np.asarray(data)

    def const(self, ctx, i: int) -> np.ndarray | None:
        t = ctx.op.inputs[i] if i < len(ctx.op.inputs) else -1
        if t < 0:
            return None
        if t in self.p.constants:
            return np.asarray(self.p.constants[t])
        data = ctx.const(i)
        return None if data is None else np.asarray(data)

    def act(self, x, ctx):
        mb, a = self.mb, int(ctx.options.get("fused_activation_function", ACT_NONE))
        if a == ACT_NONE:
            return x
        if a == ACT_RELU:
            return mb.relu(x=x)
        if a == ACT_RELU6:
            return mb.relu6(x=x)
        if a == ACT_RELU_N1_TO_1:
            return mb.clip(x=x, alpha=-1.0, beta=1.0)
        if a == ACT_TANH:
            return mb.tanh(x=x)
        raise CoreMLExportError(f"node {ctx.index} ({ctx.op.name}): fused activation {a} has no Core ML layer")

    def node(self, ctx) -> None:
        op = ctx.op.name
        fn = getattr(self, "op_" + op.lower(), None)
        if fn is None:
            raise CoreMLExportError(f"node {ctx.index}: {op} has no Core ML translation")
        out = fn(ctx)
        self.v[ctx.op.outputs[0]] = out

    # --- elementwise -------------------------------------------------------------------------
    def op_add(self, ctx):
        return self.act(self.mb.add(x=self.val(ctx, 0), y=self.val(ctx, 1)), ctx)

    def op_mul(self, ctx):
        return self.act(self.mb.mul(x=self.val(ctx, 0), y=self.val(ctx, 1)), ctx)

    def op_relu(self, ctx):
        return self.mb.relu(x=self.val(ctx, 0))

    def op_relu6(self, ctx):
        return self.mb.relu6(x=self.val(ctx, 0))

    def op_relu_n1_to_1(self, ctx):
        return self.mb.clip(x=self.val(ctx, 0), alpha=-1.0, beta=1.0)

    def op_tanh(self, ctx):
        return self.mb.tanh(x=self.val(ctx, 0))

    def op_logistic(self, ctx):
        return self.mb.sigmoid(x=self.val(ctx, 0))

    def op_hard_swish(self, ctx):
        x = self.val(ctx, 0)
        return self.mb.mul(x=x, y=self.mb.sigmoid_hard(x=x, alpha=1.0 / 6.0, beta=0.5))

    def op_softmax(self, ctx):
        return self.mb.softmax(x=self.val(ctx, 0), axis=-1)

    # --- shape ---------------------------------------------------------------------------------
    def op_concatenation(self, ctx):
        vals = [self.val(ctx, i) for i in range(len(ctx.op.inputs))]
        return self.mb.concat(values=vals, axis=-1)

    def op_reshape(self, ctx):
        return self.mb.reshape(x=self.val(ctx, 0), shape=np.asarray(ctx.outputs[0].shape, np.int32))

    def op_mean(self, ctx):
        axes = [int(a) for a in self.const(ctx, 1).reshape(-1)]
        return self.mb.reduce_mean(x=self.val(ctx, 0), axes=axes, keep_dims=True)

    def _pad(self, ctx, mode: str):
        paddings = self.const(ctx, 1)
        assert paddings is not None, "the Core ML rules take constant paddings only"
        pads = paddings.astype(np.int32).reshape(-1)
        kw = {}
        if mode == "constant":
            cv = self.const(ctx, 2)
            kw["constant_val"] = float(cv.reshape(-1)[0]) if cv is not None else 0.0
        return self.mb.pad(x=self.val(ctx, 0), pad=pads, mode=mode, **kw)

    def op_pad(self, ctx):
        return self._pad(ctx, "constant")

    def op_padv2(self, ctx):
        return self._pad(ctx, "constant")

    def op_mirror_pad(self, ctx):
        return self._pad(ctx, "reflect")

    # --- spatial (NCHW inside) -----------------------------------------------------------------
    def _nchw(self, x):
        return self.mb.transpose(x=x, perm=TO_NCHW)

    def _nhwc(self, x):
        return self.mb.transpose(x=x, perm=TO_NHWC)

    def _geometry(self, ctx, kh: int, kw: int):
        o = ctx.options
        sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
        dh, dw = int(o.get("dilation_h_factor", 1)), int(o.get("dilation_w_factor", 1))
        _, ih, iw, _ = ctx.inputs[0].shape
        _, oh, ow, _ = ctx.outputs[0].shape
        if int(o.get("padding", SAME)) == SAME:
            pad = [*_same_pads(ih, kh, sh, dh, oh), *_same_pads(iw, kw, sw, dw, ow)]
        else:
            pad = [0, 0, 0, 0]
        return [sh, sw], [dh, dw], pad

    def _conv(self, ctx, w_oihw: np.ndarray, groups: int):
        strides, dil, pad = self._geometry(ctx, w_oihw.shape[2], w_oihw.shape[3])
        b = self.const(ctx, 2)
        kw = {"bias": b.astype(np.float32)} if b is not None else {}
        y = self.mb.conv(x=self._nchw(self.val(ctx, 0)), weight=w_oihw.astype(np.float32), strides=strides,
                         dilations=dil, pad_type="custom", pad=pad, groups=groups, **kw)
        return self.act(self._nhwc(y), ctx)

    def op_conv_2d(self, ctx):
        w = self.const(ctx, 1)  # OHWI
        groups = ctx.inputs[0].shape[3] // w.shape[3]
        return self._conv(ctx, w.transpose(0, 3, 1, 2), groups)

    def op_depthwise_conv_2d(self, ctx):
        w = self.const(ctx, 1)  # 1 H W (C*M)
        cin = ctx.inputs[0].shape[3]
        return self._conv(ctx, w.transpose(3, 0, 1, 2), cin)

    def op_transpose_conv(self, ctx):
        w = self.const(ctx, 1)  # O H W I
        o = ctx.options
        sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
        n, oh, ow, oc = (int(v) for v in self.const(ctx, 0).reshape(-1))
        _, ih, iw, _ = ctx.inputs[2].shape
        kh, kw = w.shape[1], w.shape[2]
        pad = [0, 0, 0, 0]
        if int(o.get("padding", SAME)) == SAME:
            th, tw = max((ih - 1) * sh + kh - oh, 0), max((iw - 1) * sw + kw - ow, 0)
            pad = [th // 2, th - th // 2, tw // 2, tw - tw // 2]
        y = self.mb.conv_transpose(x=self._nchw(self.val(ctx, 2)), weight=w.transpose(3, 0, 1, 2).astype(np.float32),
                                   strides=[sh, sw], pad_type="custom", pad=pad, output_shape=[n, oc, oh, ow])
        return self._nhwc(y)

    def _pool(self, ctx, kind: str):
        o = ctx.options
        kh, kw = int(o["filter_height"]), int(o["filter_width"])
        strides, _, pad = self._geometry(ctx, kh, kw)
        x = self._nchw(self.val(ctx, 0))
        if kind == "max":
            y = self.mb.max_pool(x=x, kernel_sizes=[kh, kw], strides=strides, pad_type="custom", pad=pad)
        else:
            y = self.mb.avg_pool(x=x, kernel_sizes=[kh, kw], strides=strides, pad_type="custom", pad=pad,
                                 exclude_padding_from_average=True)
        return self._nhwc(y)

    def op_max_pool_2d(self, ctx):
        return self._pool(ctx, "max")

    def op_average_pool_2d(self, ctx):
        return self._pool(ctx, "avg")

    def op_resize_bilinear(self, ctx):
        _, oh, ow, _ = ctx.outputs[0].shape
        o = ctx.options
        mode = ("STRICT_ALIGN_CORNERS" if o.get("align_corners") else
                "UNALIGN_CORNERS" if o.get("half_pixel_centers") else "DEFAULT")
        y = self.mb.resize_bilinear(x=self._nchw(self.val(ctx, 0)), target_size_height=int(oh),
                                    target_size_width=int(ow), sampling_mode=mode)
        return self._nhwc(y)

    # --- dense ---------------------------------------------------------------------------------
    def op_fully_connected(self, ctx):
        w = self.const(ctx, 1).astype(np.float32)
        b = self.const(ctx, 2)
        x = self.mb.reshape(x=self.val(ctx, 0), shape=np.asarray([1, w.shape[1]], np.int32))
        kw = {"bias": b.astype(np.float32)} if b is not None else {}
        y = self.act(self.mb.linear(x=x, weight=w, **kw), ctx)
        return self.mb.reshape(x=y, shape=np.asarray(ctx.outputs[0].shape, np.int32))


def partition_program(partition: Partition, names: Mapping[int, str], fmt: str = "mlprogram"):
    """The MIL program of one partition; `names` gives each boundary tensor's feature name.

    The opset is iOS 15 for an ML Program, iOS 13 (Core ML 3) for a NeuralNetwork model.
    """
    require_coremltools()
    import coremltools as ct
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program

    shapes = {}
    for ctx in partition.contexts.values():
        for t, tensor in zip(ctx.op.inputs, ctx.inputs):
            if tensor is not None:
                shapes[t] = tuple(int(d) for d in tensor.shape)
    live = [t for t in partition.inputs if t not in partition.constants]
    specs = {names[t]: mb.placeholder(shape=shapes[t]) for t in live}
    with Function(specs, ct.target.iOS15 if fmt == "mlprogram" else ct.target.iOS13) as func:
        values: dict[int, Any] = {t: func.inputs[names[t]] for t in live}
        values.update({t: np.asarray(c, np.float32) if np.asarray(c).dtype.kind == "f" else np.asarray(c)
                       for t, c in partition.constants.items()})
        tr = _Translator(mb, partition, values)
        for n in partition.nodes:
            tr.node(partition.contexts[n])
        func.set_outputs([mb.identity(x=values[t], name=names[t]) for t in partition.outputs])
    prog = Program()
    prog.add_function("main", func)
    return prog


def plan(model: str | os.PathLike | bytes, options: Mapping[str, Any] | None = None):
    """(interpreter, delegate, partitions): what `--use_coreml` with `options` delegates."""
    from acelera.core.interpreter import Interpreter
    from acelera.core.partition import apply_delegates
    from acelera.plugins.coreml import SPEC
    from acelera.plugins.coreml.device import CoreMLDelegate

    options = dict(options or {})
    interp = (Interpreter(model_content=model) if isinstance(model, (bytes, bytearray))
              else Interpreter(model_path=os.fspath(model)))
    d = CoreMLDelegate(options)
    d.max_delegated_partitions, d.min_nodes_per_partition = SPEC.partition_limits(options)
    report = apply_delegates(interp._rt.ex, [d], dry_run=True)
    return interp, d, report.partitions_of(d.name)


def export_model(model: str | os.PathLike, out_dir: str | os.PathLike, options: Mapping[str, Any] | None = None,
                 fmt: str = "mlprogram") -> list[Path]:
    """Plan `model` as `--use_coreml` would with `options` and write each partition to `out_dir`.

    Returns the paths written (one package per partition, in partition order); also writes
    `out_dir/manifest.json`. Raises CoreMLExportError when coremltools is missing or no node
    is delegated, ModelError for a bad model.
    """
    if fmt not in FORMATS:
        raise CoreMLExportError(f"unknown Core ML export format '{fmt}' (expected one of {', '.join(FORMATS)})")
    ct = require_coremltools()
    interp, d, parts = plan(model, options)
    if not parts:
        raise CoreMLExportError(f"{model}: the Core ML delegate takes no node of this model "
                                f"(see `acelera analyze {model} --use_coreml`)")
    ex = interp._rt.ex
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    precision = ct.precision.FLOAT16
    units = ct.ComputeUnit.CPU_AND_NE if d.devices == "neural_engine" else ct.ComputeUnit.ALL
    written, manifest = [], []
    sg = interp.model.main
    for k, part in enumerate(parts):
        taken: set[str] = set()
        names = {t: feature_name(sg.tensors[t].name, taken) for t in (*part.inputs, *part.outputs)}
        prog = partition_program(part, names, fmt)
        suffix = ".mlpackage" if fmt == "mlprogram" else ".mlmodel"
        path = out / f"partition_{k}{suffix}"
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # coremltools' progress bars
                if fmt == "mlprogram":
                    mlmodel = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS15,
                                         compute_precision=precision, compute_units=units)
                else:
                    mlmodel = ct.convert(prog, convert_to="neuralnetwork",
                                         minimum_deployment_target=ct.target.iOS13, compute_units=units)
            mlmodel.short_description = (f"acelera Core ML partition {k} of {Path(model).name}: "
                                         f"TFLite nodes {list(part.nodes)}")
            mlmodel.save(str(path))
        except AceleraError:
            raise
        except Exception as e:
            raise CoreMLExportError(f"partition {k} (nodes {list(part.nodes)}): coremltools failed: "
                                    f"{type(e).__name__}: {e}") from None
        written.append(path)
        live = [t for t in part.inputs if t not in part.constants]
        manifest.append({
            "package": path.name, "nodes": list(part.nodes),
            "inputs": [{"feature": names[t], "tensor": t, "name": sg.tensors[t].name,
                        "shape": list(ex.shapes[t])} for t in live],
            "outputs": [{"feature": names[t], "tensor": t, "name": sg.tensors[t].name,
                         "shape": list(ex.shapes[t])} for t in part.outputs],
        })
    (out / "manifest.json").write_text(json.dumps({
        "model": os.fspath(model), "format": fmt, "coreml_version": d.coreml_version,
        "coreml_devices": d.devices, "compute_precision": "float16", "partitions": manifest}, indent=2) + "\n")
    return written
