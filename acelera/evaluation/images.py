"""Image input for the evaluation tools: listing, decoding, cropping, resizing, normalizing.

Decoding uses Pillow (any format it reads, converted to RGB; `.rgb8` files are raw RGB bytes
already at the model's size, as in TFLite). The geometry follows TFLite's
ImagePreprocessingStage in float32: a square central crop of 0.875 of the shorter side
(classification only), then TFLite's reference bilinear resize (align_corners=false,
half_pixel_centers=false) to the model input.

Normalization, decided per input tensor (`InputSpec.of`):

- float input: `(pixel - mean) / std` per channel, with mean/std from the model's TFLite
  metadata (NormalizationOptions of the input's process units) when present, else TFLite's
  default mean 127.5, std 127.5 (the [-1, 1] range of MobileNet/Inception-style models).
- uint8 / int8 input with normalization metadata: normalize as above, then quantize with the
  input's scale and zero point (round half to even, saturate), as the metadata schema says.
- uint8 / int8 input without metadata: TFLite's tool behaviour: the pixel codes themselves for
  uint8, `pixel - 128` for int8 (truncated), so the input's quantization parameters carry the
  model's normalization. Quantizing a fixed [-1, 1] float instead would give wrong inputs to
  models whose quantized input expects [0, 1] or [0, 255].
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from acelera.core.kernels.resize import bilinear_float32
from acelera.evaluation.common import EvaluationError

F32 = np.float32
CROP_FRACTION = 0.875
RAW_EXTENSION = ".rgb8"
DEFAULT_MEAN = 127.5
DEFAULT_STD = 127.5


# --- files ---------------------------------------------------------------------------------
def list_images(directory: str, flag: str = "ground_truth_images_path") -> list[str]:
    """Every regular, non-hidden file of `directory`, sorted by path (TFLite's order)."""
    if not directory:
        raise EvaluationError(f"--{flag} is required: the directory of images to evaluate")
    directory = directory.rstrip("/") or "/"
    if not os.path.isdir(directory):
        raise EvaluationError(f"--{flag}: no such directory: {directory}")
    paths = sorted(os.path.join(directory, n) for n in os.listdir(directory)
                   if not n.startswith(".") and os.path.isfile(os.path.join(directory, n)))
    if not paths:
        raise EvaluationError(f"--{flag}: no image files in {directory}")
    return paths


def load_image(path: str, raw_shape: tuple[int, int] | None = None) -> np.ndarray:
    """An RGB image as float32 [H, W, 3]; `.rgb8` raw files need `raw_shape` (H, W)."""
    if path.lower().endswith(RAW_EXTENSION):
        try:
            data = np.fromfile(path, np.uint8)
        except OSError as e:
            raise EvaluationError(f"cannot read image {path}: {e.strerror or e}") from None
        if raw_shape is None or data.size != raw_shape[0] * raw_shape[1] * 3:
            want = f"{raw_shape[0]}x{raw_shape[1]}x3 = {raw_shape[0] * raw_shape[1] * 3}" if raw_shape else "?"
            raise EvaluationError(f"raw image {path} has {data.size} bytes; the model input needs {want}")
        return data.reshape(raw_shape[0], raw_shape[1], 3).astype(F32)
    try:
        from PIL import Image
    except ImportError:
        raise EvaluationError("the evaluation tools decode images with Pillow: pip install 'acelera[eval]'") from None
    im: Image.Image
    try:
        with Image.open(path) as im:
            im.load()
            if im.mode != "RGB":
                im = im.convert("RGB")
            arr = np.asarray(im, dtype=np.uint8)
    except FileNotFoundError:
        raise EvaluationError(f"no such image: {path}") from None
    except Exception as e:  # Pillow raises UnidentifiedImageError, OSError, SyntaxError, DecompressionBombError...
        raise EvaluationError(f"cannot decode image {path}: {type(e).__name__}: {e}") from None
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.size == 0:
        raise EvaluationError(f"cannot decode image {path}: got an array of shape {list(arr.shape)}")
    return arr.astype(F32)


# --- geometry (TFLite's ImagePreprocessingStage) ---------------------------------------------
def central_crop(img: np.ndarray, fraction: float = CROP_FRACTION, square: bool = True) -> np.ndarray:
    """The centred `fraction` of the image; `square` takes the shorter side for both."""
    h, w = img.shape[:2]
    ch, cw = _round_half_away(fraction * h), _round_half_away(fraction * w)  # C's round()
    if square:
        ch = cw = min(ch, cw)
    if ch <= 0 or cw <= 0:
        raise EvaluationError(f"image of {w}x{h} pixels is too small to crop")
    top = _round_half_away((h - ch) / 2.0)
    left = _round_half_away((w - cw) / 2.0)
    return img[top:top + ch, left:left + cw]


def _round_half_away(x: float) -> int:
    return int(np.floor(x + 0.5)) if x >= 0 else -int(np.floor(-x + 0.5))


def resize_bilinear(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """TFLite's ResizeBilinear (align_corners=false, half_pixel_centers=false) in float32: the
    RESIZE_BILINEAR kernel itself, so preprocessing and the op agree by construction."""
    return bilinear_float32(img, height, width)


# --- normalization -------------------------------------------------------------------------
@dataclass(frozen=True)
class InputSpec:
    """How images become the model's input tensor."""

    height: int
    width: int
    dtype: np.dtype
    mean: tuple[float, ...] | None = None  # from metadata; None: TFLite's defaults
    std: tuple[float, ...] | None = None
    scale: float = 0.0  # input quantization (quantized dtypes)
    zero_point: int = 0

    @classmethod
    def of(cls, interpreter: Any, model_file: str = "the model") -> "InputSpec":
        """The spec of the model's only input, which must be [1, H, W, 3] float32/uint8/int8."""
        ins = interpreter.get_input_details()
        if len(ins) != 1:
            raise EvaluationError(f"{model_file}: an image model must have 1 input, this one has {len(ins)}")
        d = ins[0]
        shape = [int(s) for s in d["shape"]]
        if len(shape) != 4 or shape[0] != 1 or shape[3] != 3:
            raise EvaluationError(f"{model_file}: the input must have shape [1, height, width, 3], got {shape}")
        dtype = np.dtype(d["dtype"])
        if dtype not in (np.float32, np.uint8, np.int8):
            raise EvaluationError(f"{model_file}: input type {dtype} is not supported (float32, uint8, int8)")
        scale, zp = d["quantization"]
        norm = normalization_from_metadata(interpreter.model)
        mean, std = norm if norm else (None, None)
        if dtype != np.float32 and norm and scale == 0.0:
            raise EvaluationError(f"{model_file}: the {dtype} input has normalization metadata but no quantization")
        return cls(shape[1], shape[2], dtype, mean, std, float(scale), int(zp))

    def describe(self) -> str:
        if self.mean is not None:
            assert self.std is not None, "metadata normalization sets mean and std together"
            how = f"(pixel - {_fmt(self.mean)}) / {_fmt(self.std)} from the model's metadata"
            if self.dtype != np.float32:
                how += f", quantized with scale {self.scale:g}, zero point {self.zero_point}"
            return how
        if self.dtype == np.float32:
            return f"(pixel - {DEFAULT_MEAN:g}) / {DEFAULT_STD:g} (TFLite's default, range [-1, 1])"
        return "pixel codes as they are" if self.dtype == np.uint8 else "pixel - 128"

    def normalize(self, img: np.ndarray) -> np.ndarray:
        """float32 [H, W, 3] pixels in [0, 255] -> the input tensor [1, H, W, 3]."""
        if self.mean is not None:
            mean = np.asarray(self.mean, F32)
            std = np.asarray(self.std, F32)
            x = (img - mean) / std
            if self.dtype == np.float32:
                return x.astype(F32)[None]
            info = np.iinfo(self.dtype)
            q = np.rint(x.astype(np.float64) / self.scale) + self.zero_point
            return np.clip(q, info.min, info.max).astype(self.dtype)[None]
        if self.dtype == np.float32:
            return ((img - F32(DEFAULT_MEAN)) * F32(1.0 / DEFAULT_STD)).astype(F32)[None]
        if self.dtype == np.uint8:
            return np.trunc(img).astype(np.uint8)[None]
        return np.trunc(img - F32(128)).astype(np.int8)[None]


def _fmt(v: Sequence[float]) -> str:
    return f"{v[0]:g}" if len(set(v)) == 1 else "[" + ", ".join(f"{x:g}" for x in v) + "]"


def preprocess(path: str, spec: InputSpec, crop: bool) -> tuple[np.ndarray, tuple[int, int]]:
    """Load, (crop,) resize and normalize one image: (the model's input tensor, (height, width)
    of the image as decoded)."""
    img = load_image(path, (spec.height, spec.width))
    size = (int(img.shape[0]), int(img.shape[1]))
    if not path.lower().endswith(RAW_EXTENSION):
        if crop:
            img = central_crop(img)
        img = resize_bilinear(img, spec.height, spec.width)  # always, as TFLite (identity at the same size)
    return spec.normalize(img), size


# --- TFLite metadata (tflite_support's metadata_schema.fbs) ----------------------------------
METADATA_NAME = "TFLITE_METADATA"
_NORMALIZATION_OPTIONS = 1  # ProcessUnitOptions union tag


def normalization_from_metadata(model: Any, input_index: int = 0) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """(mean, std) of NormalizationOptions on input `input_index` of subgraph 0, or None.

    Read with flatbuffers' generic tables: ModelMetadata.subgraph_metadata (field 3) ->
    SubGraphMetadata.input_tensor_metadata (field 2) -> TensorMetadata.process_units (field 4)
    -> ProcessUnit.options (union, fields 0/1) -> NormalizationOptions.mean/std (fields 0/1).
    Malformed metadata is ignored (None): it is advisory.
    """
    data = getattr(model, "metadata", {}).get(METADATA_NAME)
    if not data:
        return None
    try:
        return _parse_normalization(bytes(data), input_index)
    except Exception:
        return None


def _parse_normalization(buf: bytes, input_index: int):
    import flatbuffers
    from flatbuffers import number_types as N
    from flatbuffers.table import Table

    b = bytearray(buf)

    def table_at(pos: int) -> Table:
        return Table(b, pos)

    def field(t: Table, fid: int) -> int:
        return t.Offset(4 + 2 * fid)

    def vector_tables(t: Table, fid: int) -> list[Table]:
        o = field(t, fid)
        if not o:
            return []
        start, n = t.Vector(o), t.VectorLen(o)
        return [table_at(t.Indirect(start + 4 * i)) for i in range(n)]

    def float_vector(t: Table, fid: int) -> tuple[float, ...]:
        o = field(t, fid)
        return tuple(float(v) for v in t.GetVectorAsNumpy(N.Float32Flags, o)) if o else ()

    root = table_at(flatbuffers.encode.Get(flatbuffers.packer.uoffset, b, 0))
    subgraphs = vector_tables(root, 3)
    if not subgraphs:
        return None
    inputs = vector_tables(subgraphs[0], 2)
    if input_index >= len(inputs):
        return None
    for unit in vector_tables(inputs[input_index], 4):
        o = field(unit, 0)
        kind = unit.Get(N.Uint8Flags, o + unit.Pos) if o else 0
        if kind != _NORMALIZATION_OPTIONS:
            continue
        o = field(unit, 1)
        if not o:
            continue
        opts = Table(b, 0)
        unit.Union(opts, o)
        mean, std = float_vector(opts, 0), float_vector(opts, 1)
        if not mean or not std or any(s == 0 for s in std):
            return None
        mean = mean * 3 if len(mean) == 1 else mean
        std = std * 3 if len(std) == 1 else std
        if len(mean) != 3 or len(std) != 3:
            return None
        return mean, std
    return None
