"""An execution-plan step and the facts about ops the executor plans with."""
from __future__ import annotations

from dataclasses import dataclass

from acelera.core.errors import KernelError
from acelera.core.kernels.registry import Kernel
from acelera.core.model import Subgraph


@dataclass
class Step:
    """One entry of the execution plan: a kernel over tensor indices."""

    label: str  # e.g. "node 4 (CONV_2D)"
    fn: Kernel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    nodes: tuple[int, ...]  # model node indices this step executes
    delegate: str | None = None
    in_shapes: tuple | None = None  # input shapes the kernel was prepared for (None: not yet)



def node_label(sg: Subgraph, i: int) -> str:
    where = f"subgraph {sg.index} " if sg.index else ""
    return f"{where}node {i} ({sg.operators[i].name})"


# Ops whose output shapes depend on input values; nodes downstream of them may only be
# preparable at invoke, once real values flow (LiteRT's dynamic tensors).
DATA_DEPENDENT_SHAPES = frozenset({
    "WHERE", "UNIQUE", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "RANGE", "WHILE", "IF",
    "READ_VARIABLE", "RESHAPE", "FILL", "BROADCAST_TO", "TILE", "SLICE", "STRIDED_SLICE", "PAD",
    "PADV2", "MIRROR_PAD", "SCATTER_ND", "SPARSE_TO_DENSE", "TOPK_V2", "ONE_HOT", "RFFT2D",
    "SEGMENT_SUM", "UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
    "UNSORTED_SEGMENT_MIN", "BROADCAST_ARGS", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR",
    "TRANSPOSE_CONV", "CONV_3D_TRANSPOSE", "SPLIT_V", "EXPAND_DIMS", "HASHTABLE_FIND",
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "DYNAMIC_UPDATE_SLICE", "CUSTOM", "RANDOM_UNIFORM",
    "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "STABLEHLO_COMPOSITE", "DILATE", "EMBEDDING_LOOKUP_SPARSE", "SKIP_GRAM",
})


# Ops never folded at prepare even when every input is constant: state (variables, hashtables,
# stateful sequence ops), randomness, control flow and custom code (Executor._foldable).
NEVER_FOLDED = frozenset({
    "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "STABLEHLO_RNG_BIT_GENERATOR",
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "HASHTABLE", "HASHTABLE_FIND",
    "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "CALL_ONCE", "WHILE", "IF", "CALL",
    "STABLEHLO_WHILE", "STABLEHLO_CASE", "STABLEHLO_COMPOSITE", "STABLEHLO_CUSTOM_CALL", "CUSTOM",
    "DELEGATE", "SVDF", "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "RNN",
})

# Steps prepared at invoke that an executor keeps (see Executor._prepared_step).
MAX_PREPARED_STEPS = 256

def unprepared(*args):
    raise KernelError("node was not prepared (its input shapes are only known at invoke)")
