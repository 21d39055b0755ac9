"""TFLite_Detection_PostProcess against LiteRT (which registers the custom op in its default and
builtin resolvers), plus a hand-checked case and the option/shape errors."""
import numpy as np
import pytest
from flatbuffers import flexbuffers
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import run_acelera, run_litert

from acelera.core.builder import ModelBuilder
from acelera.core.errors import AceleraError, UnsupportedOpError
from acelera.core.interpreter import Interpreter
from acelera.core.kernels.detection_postprocess import parse_options

OP = "TFLite_Detection_PostProcess"
SCALES = dict(y_scale=10.0, x_scale=10.0, h_scale=5.0, w_scale=5.0)


def postprocess_model(anchors, num_classes, *, background=True, quant=False, max_detections=5,
                      max_classes_per_detection=1, score_threshold=0.3, iou_threshold=0.5, **extra) -> bytes:
    """One TFLite_Detection_PostProcess node over inputs (box encodings, class predictions) and
    constant anchors; `quant` makes encodings, predictions and anchors uint8."""
    nb = anchors.shape[0]
    ncwb = num_classes + (1 if background else 0)
    b = ModelBuilder()
    if quant:
        enc = b.add_input("box_encodings", (1, nb, 4), np.uint8, (0.05, 128))
        cls = b.add_input("class_predictions", (1, nb, ncwb), np.uint8, (1 / 255, 0))
        anc = b.add_constant("anchors", np.clip(np.round(anchors * 255), 0, 255).astype(np.uint8), (1 / 255, 0))
    else:
        enc = b.add_input("box_encodings", (1, nb, 4), np.float32)
        cls = b.add_input("class_predictions", (1, nb, ncwb), np.float32)
        anc = b.add_constant("anchors", anchors.astype(np.float32))
    d = max_detections * max_classes_per_detection
    outs = [b.add_tensor(n, s, np.float32) for n, s in
            [("boxes", (1, d, 4)), ("classes", (1, d)), ("scores", (1, d)), ("count", (1,))]]
    opts = dict(max_detections=max_detections, max_classes_per_detection=max_classes_per_detection,
                nms_score_threshold=score_threshold, nms_iou_threshold=iou_threshold, num_classes=num_classes,
                **SCALES, **extra)
    b.add_operator("CUSTOM", [enc, cls, anc], outs, custom_code=OP, custom_options=bytes(flexbuffers.Dumps(opts)))
    b.mark_outputs(*outs)
    return b.build()


def random_anchors(rng, n):
    return np.stack([rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n),
                     rng.uniform(0.05, 0.5, n), rng.uniform(0.05, 0.5, n)], 1).astype(np.float32)


def assert_same_detections(got, want, stride, written=None):
    """Equal counts, and equal boxes/classes/scores where LiteRT writes them: `written` of every
    `stride` rows for each detection (fast NMS leaves the other rows uninitialized)."""
    assert [g.shape for g in got] == [w.shape for w in want]
    assert all(g.dtype == np.float32 for g in got)
    n = int(want[3][0])
    assert int(got[3][0]) == n
    rows = [k * stride + c for k in range(n) for c in range(written or stride)]
    for i in range(3):
        np.testing.assert_array_equal(got[i][0][rows], want[i][0][rows], err_msg=f"output {i}")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), nb=st.integers(1, 40), num_classes=st.integers(1, 5),
       background=st.booleans(), quant=st.booleans(), regular=st.booleans(), mcpd=st.integers(1, 3),
       max_det=st.integers(1, 12), dpc=st.one_of(st.none(), st.integers(1, 6)),
       score_threshold=st.sampled_from([0.0, 0.2, 0.5, 0.9]), iou=st.sampled_from([0.3, 0.5, 0.6, 1.0]))
def test_matches_litert(seed, nb, num_classes, background, quant, regular, mcpd, max_det, dpc, score_threshold, iou):
    if regular:
        mcpd = 1  # regular NMS writes max_detections rows whatever max_classes_per_detection says
    rng = np.random.default_rng(seed)
    extra = {"use_regular_nms": regular}
    if dpc is not None:
        extra["detections_per_class"] = dpc
    m = postprocess_model(random_anchors(rng, nb), num_classes, background=background, quant=quant,
                          max_detections=max_det, max_classes_per_detection=mcpd, score_threshold=score_threshold,
                          iou_threshold=iou, **extra)
    ncwb = num_classes + (1 if background else 0)
    if quant:
        x = [rng.integers(0, 256, (1, nb, 4)).astype(np.uint8),
             rng.integers(0, 256, (1, nb, ncwb)).astype(np.uint8)]
        if mcpd > 1:  # equal class scores of one anchor: LiteRT's partial_sort order is unspecified
            x[1] = np.stack([rng.permutation(256)[:ncwb] for _ in range(nb)])[None].astype(np.uint8)
    else:
        x = [rng.normal(0, 1, (1, nb, 4)).astype(np.float32), rng.uniform(0, 1, (1, nb, ncwb)).astype(np.float32)]
    want = run_litert(m, x, reference="builtin")
    assert_same_detections(run_acelera(m, x), want, mcpd, min(mcpd, num_classes))


def test_matches_litert_default_resolver():
    rng = np.random.default_rng(5)
    m = postprocess_model(random_anchors(rng, 64), 4, max_detections=10, use_regular_nms=True)
    x = [rng.normal(0, 1, (1, 64, 4)).astype(np.float32), rng.uniform(0, 1, (1, 64, 5)).astype(np.float32)]
    assert_same_detections(run_acelera(m, x), run_litert(m, x, reference=False), 1)


def test_hand_checked_case():
    """Three anchors, zero encodings: boxes are the anchors. Anchor 1 overlaps anchor 0 (IoU 0.6)
    and is suppressed; anchor 2 is apart. Class column 0 is the background."""
    anchors = np.array([[0.5, 0.5, 0.2, 0.2], [0.5, 0.54, 0.2, 0.2], [0.2, 0.2, 0.1, 0.1]], np.float32)
    m = postprocess_model(anchors, 2, max_detections=3, score_threshold=0.1, iou_threshold=0.5)
    scores = np.array([[[0.0, 0.9, 0.1], [0.0, 0.8, 0.0], [0.0, 0.05, 0.6]]], np.float32)
    boxes, classes, sc, count = run_acelera(m, [np.zeros((1, 3, 4), np.float32), scores])
    assert count.tolist() == [2.0]
    np.testing.assert_allclose(boxes[0, :2], [[0.4, 0.4, 0.6, 0.6], [0.15, 0.15, 0.25, 0.25]], atol=1e-6)
    assert classes[0].tolist() == [0.0, 1.0, 0.0] and sc[0].tolist() == pytest.approx([0.9, 0.6, 0.0])
    # IoU threshold 0.7 keeps the overlapping box
    m = postprocess_model(anchors, 2, max_detections=3, score_threshold=0.1, iou_threshold=0.7)
    assert run_acelera(m, [np.zeros((1, 3, 4), np.float32), scores])[3].tolist() == [3.0]


def test_option_defaults_and_types():
    data = bytes(flexbuffers.Dumps({"max_detections": 10, "max_classes_per_detection": 1, "num_classes": 90,
                                    "nms_score_threshold": 1e-8, "nms_iou_threshold": 0.6, "y_scale": 10}))
    o = parse_options(data)
    assert o["detections_per_class"] == 100 and o["use_regular_nms"] is False
    assert o["y_scale"] == 10.0 and o["h_scale"] == 0.0  # absent keys read as 0 like LiteRT's
    assert o["nms_score_threshold"] == float(np.float32(1e-8))


def _single(custom_options, enc_shape=(1, 4, 4), cls_shape=(1, 4, 3), anchors=None):
    b = ModelBuilder()
    enc = b.add_input("e", enc_shape, np.float32)
    cls = b.add_input("c", cls_shape, np.float32)
    anc = b.add_constant("a", anchors if anchors is not None else np.full((4, 4), 0.5, np.float32))
    outs = [b.add_tensor(f"o{i}", (1,), np.float32) for i in range(4)]
    b.add_operator("CUSTOM", [enc, cls, anc], outs, custom_code=OP, custom_options=custom_options)
    b.mark_outputs(*outs)
    return Interpreter(model_content=b.build())


def test_errors():
    good = dict(max_detections=3, max_classes_per_detection=1, num_classes=2, nms_score_threshold=0.1,
                nms_iou_threshold=0.5, **SCALES)
    _single(bytes(flexbuffers.Dumps(good))).allocate_tensors()
    with pytest.raises(UnsupportedOpError, match="FlexBuffer"):
        _single(b"\x01\x02").allocate_tensors()
    with pytest.raises(UnsupportedOpError, match="columns for num_classes=5"):
        _single(bytes(flexbuffers.Dumps({**good, "num_classes": 5}))).allocate_tensors()
    with pytest.raises(UnsupportedOpError, match="anchors must have shape"):
        _single(bytes(flexbuffers.Dumps(good)), anchors=np.zeros((3, 4), np.float32)).allocate_tensors()
    with pytest.raises(AceleraError, match="nms_iou_threshold"):
        _single(bytes(flexbuffers.Dumps({**good, "nms_iou_threshold": 0.0}))).allocate_tensors()
    with pytest.raises(UnsupportedOpError, match="version 2"):
        b = ModelBuilder()
        x = b.add_input("e", (1, 4, 4), np.float32)
        outs = [b.add_tensor(f"o{i}", (1,), np.float32) for i in range(4)]
        b.add_operator("CUSTOM", [x, x, x], outs, version=2, custom_code=OP)
        b.mark_outputs(*outs)
        Interpreter(model_content=b.build()).allocate_tensors()
