"""NON_MAX_SUPPRESSION_V4 and NON_MAX_SUPPRESSION_V5 reference kernels
(tflite/kernels/non_max_suppression.cc, tflite/kernels/internal/reference/non_max_suppression.h).

LiteRT picks hard or soft NMS by the number of inputs (6 inputs: soft NMS with sigma), keeps
candidates in a std::priority_queue and scores in float32. The queue is reproduced with
libstdc++'s binary-heap algorithm (the library the LiteRT wheel links), so candidates with equal
scores leave it in LiteRT's order, and soft-NMS decays use glibc's expf algorithm (which the
wheel calls), so decayed scores round as LiteRT's do. Outputs: selected indices (and, for soft NMS, their scores)
padded with zeros to max_output_size, and the number selected.
"""
from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from acelera.core.errors import KernelError
from acelera.core.kernels.registry import Kernel, NodeContext, in_shape_pass, register
from acelera.core.model import MAX_TENSOR_BYTES

_F32 = np.float32


def _exp2_table() -> np.ndarray:
    """glibc's expf table: the bits of 2^(i/32) rounded to double, minus i << 47."""
    with localcontext() as ctx:
        ctx.prec = 60
        pows = [float(Fraction(Decimal(2) ** (Decimal(i) / 32))) for i in range(32)]
    return np.array(pows, np.float64).view(np.uint64) - (np.arange(32, dtype=np.uint64) << np.uint64(47))


_EXP2_T = _exp2_table()
_INV_LN2_N = float.fromhex("0x1.71547652b82fep+0") * 32
_SHIFT = float.fromhex("0x1.8p+52")
_EXP_C = (float.fromhex("0x1.c6af84b912394p-5") / 32 ** 3, float.fromhex("0x1.ebfce50fac4f3p-3") / 32 ** 2,
          float.fromhex("0x1.62e42ff0c52d6p-1") / 32)


def _expf(x: np.ndarray) -> np.ndarray:
    """std::exp(float) as glibc computes it (a 32-entry table and a cubic in double), so
    soft-NMS scores round exactly as LiteRT's; numpy's float32 exp differs in the last bit."""
    x = np.asarray(x, _F32)
    z = _INV_LN2_N * x.astype(np.float64)
    kd = z + _SHIFT
    ki = kd.view(np.uint64)
    r = z - (kd - _SHIFT)
    s = (_EXP2_T[ki % np.uint64(32)] + (ki << np.uint64(47))).view(np.float64)
    c0, c1, c2 = _EXP_C
    with np.errstate(all="ignore"):
        y = (((c0 * r + c1) * (r * r) + (c2 * r + 1.0)) * s).astype(_F32)
    y = np.where(x > _F32(float.fromhex("0x1.62e42ep6")), _F32(np.inf), y)
    y = np.where(x < _F32(float.fromhex("-0x1.9fe368p6")), _F32(0), y)
    return np.where(np.isnan(x), x, y)


class _Heap:
    """std::priority_queue<Candidate> ordered by score (max on top) as libstdc++ implements
    push_heap / pop_heap. Items are [score, index, suppress_begin]."""

    def __init__(self) -> None:
        self.a: list[list] = []

    def __len__(self) -> int:
        return len(self.a)

    def push(self, item: list) -> None:
        a = self.a
        a.append(item)
        self._sift_up(len(a) - 1, 0, item)

    def _sift_up(self, hole: int, top: int, item: list) -> None:
        a = self.a
        parent = (hole - 1) // 2
        while hole > top and a[parent][0] < item[0]:
            a[hole] = a[parent]
            hole = parent
            parent = (hole - 1) // 2
        a[hole] = item

    def pop(self) -> list:
        a = self.a
        top = a[0]
        n = len(a) - 1
        if n > 0:
            value = a[n]
            a[n] = a[0]
            hole, child = 0, 0
            while child < (n - 1) // 2:
                child = 2 * (child + 1)
                if a[child][0] < a[child - 1][0]:
                    child -= 1
                a[hole] = a[child]
                hole = child
            if n % 2 == 0 and child == (n - 2) // 2:
                child = 2 * (child + 1)
                a[hole] = a[child - 1]
                hole = child - 1
            self._sift_up(hole, 0, value)
        a.pop()
        return top


def _cmin(a: np.ndarray, b: np.ndarray | np.float32) -> np.ndarray:
    return np.where(b < a, b, a)  # std::min(a, b)


def _cmax(a: np.ndarray, b: np.ndarray | np.float32) -> np.ndarray:
    return np.where(a < b, b, a)  # std::max(a, b)


def _ious(lo_y, hi_y, lo_x, hi_x, area, i: int, js: np.ndarray) -> np.ndarray:
    """ComputeIntersectionOverUnion(boxes, i, j) for every j in js, in float32."""
    iy0, iy1, ix0, ix1, ai = lo_y[i], hi_y[i], lo_x[i], hi_x[i], area[i]
    jy0, jy1, jx0, jx1, aj = lo_y[js], hi_y[js], lo_x[js], hi_x[js], area[js]
    inter = (_cmax(_cmin(iy1, jy1) - _cmax(iy0, jy0), _F32(0))
             * _cmax(_cmin(ix1, jx1) - _cmax(ix0, jx0), _F32(0)))
    with np.errstate(all="ignore"):
        iou = inter / (ai + aj - inter)
    return np.where((ai <= 0) | (aj <= 0), _F32(0), iou).astype(_F32)


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou_thr: float,
                        score_thr: float, sigma: float) -> tuple[np.ndarray, np.ndarray, int]:
    """reference_ops::NonMaxSuppression: (selected indices, selected scores, count)."""
    boxes = np.asarray(boxes, _F32).reshape(-1, 4)
    scores = np.asarray(scores, _F32).reshape(-1)
    iou_f32, score_f32 = _F32(iou_thr), _F32(score_thr)
    y1, x1, y2, x2 = boxes.T
    lo_y, hi_y, lo_x, hi_x = _cmin(y1, y2), _cmax(y1, y2), _cmin(x1, x2), _cmax(x1, x2)
    area = (hi_y - lo_y) * (hi_x - lo_x)
    sel_idx: list[int] = []
    sel_score: list = []
    heap = _Heap()
    for i in np.flatnonzero(scores > score_f32).tolist():
        heap.push([scores[i], i, 0])
    n_out = min(len(heap), max_out)
    soft = sigma > 0
    scale = _F32(-0.5 / float(sigma)) if soft else _F32(0)
    while len(sel_idx) < n_out and len(heap):
        cand = heap.pop()
        original = cand[0]
        begin = cand[2]
        hard = False
        if len(sel_idx) > begin:
            js = np.array(sel_idx[begin:][::-1], np.int64)
            ious = _ious(lo_y, hi_y, lo_x, hi_x, area, cand[1], js)
            if not soft:
                hard = bool(np.any(ious >= iou_f32))
            else:
                score = cand[0]
                for iou, decay in zip(ious, _expf(scale * ious * ious)):
                    if iou >= iou_f32:
                        hard = True
                        break
                    score = _F32(score * decay)
                    if score <= score_f32:
                        break
                cand[0] = score
        cand[2] = len(sel_idx)
        if not hard:
            if cand[0] == original:
                sel_idx.append(cand[1])
                sel_score.append(cand[0])
            if cand[0] > score_f32:
                heap.push(cand)
    return (np.array(sel_idx, np.int32), np.array(sel_score, _F32), len(sel_idx))


def _prepare(node: NodeContext) -> Kernel:
    n_in = len(node.inputs)
    if n_in not in (5, 6):
        raise node.unsupported(f"takes 5 or 6 inputs, got {n_in}")
    ins = [t for t in node.inputs if t is not None]
    if len(ins) != n_in:
        raise node.unsupported("an absent input is not allowed")
    soft = n_in == 6
    boxes_t, scores_t, max_t, iou_t, thr_t = ins[:5]
    if boxes_t.type_name != "FLOAT32" or len(boxes_t.shape) != 2 or boxes_t.shape[1] != 4:
        raise node.unsupported("boxes must be a FLOAT32 [num_boxes, 4] tensor")
    if scores_t.type_name != "FLOAT32" or tuple(scores_t.shape) != (boxes_t.shape[0],):
        raise node.unsupported("scores must be a FLOAT32 vector with one score per box")
    if max_t.type_name != "INT32" or max_t.shape != ():
        raise node.unsupported("max_output_size must be an INT32 scalar")
    scalars = (iou_t, thr_t) + ((ins[5],) if soft else ())
    if any(t.type_name != "FLOAT32" or t.shape != () for t in scalars):
        raise node.unsupported("iou_threshold, score_threshold and sigma must be FLOAT32 scalars")
    want = ("INT32", "FLOAT32", "INT32") if soft else ("INT32", "INT32")
    if len(node.outputs) != len(want) or any(o.type_name != w for o, w in zip(node.outputs, want)):
        raise node.unsupported(f"outputs must be {', '.join(want)}")
    if max_t.data is not None and int(max_t.data.reshape(-1)[0]) < 0:
        raise node.unsupported(f"max_output_size {int(max_t.data.reshape(-1)[0])} is negative")

    def run(boxes, scores, max_out, iou_thr, score_thr, sigma=None):
        m = int(np.asarray(max_out).reshape(-1)[0])
        if m < 0:
            if in_shape_pass():
                m = 0
            else:
                raise KernelError(f"max_output_size {m} is negative")
        if 4 * m > MAX_TENSOR_BYTES:
            raise KernelError(f"max_output_size {m} exceeds the tensor size limit")
        s = _F32(np.asarray(sigma).reshape(-1)[0]) if soft else _F32(0)
        idx = np.zeros(m, np.int32)
        sc = np.zeros(m, _F32)
        count = 0
        if not in_shape_pass():
            if s < 0:
                raise KernelError(f"Invalid sigma value for soft NMS: {float(s)}")
            sel, sel_scores, count = non_max_suppression(
                boxes, scores, m, float(np.asarray(iou_thr).reshape(-1)[0]),
                float(np.asarray(score_thr).reshape(-1)[0]), float(s))
            idx[:count] = sel
            sc[:count] = sel_scores
        n = np.array(count, np.int32)
        return (idx, sc, n) if soft else (idx, n)

    return run


@register("NON_MAX_SUPPRESSION_V4", max_version=1, dtypes=("FLOAT32",))
def non_max_suppression_v4(node: NodeContext) -> Kernel:
    return _prepare(node)


@register("NON_MAX_SUPPRESSION_V5", max_version=1, dtypes=("FLOAT32",))
def non_max_suppression_v5(node: NodeContext) -> Kernel:
    return _prepare(node)
