"""Conformance case generators for the newer reference kernels (issue 13), registered on import
(cases.py imports this module).

One module per family: generators_math.py (element-wise math, random numbers, complex parts,
boolean reductions), generators_stablehlo.py, generators_shapes.py, generators_movement.py,
generators_nn.py (quantization, normalization, 3-D convolution, non-max suppression),
generators_custom.py, generators_recurrent.py; generators_kit.py holds the contract they share,
`DTYPES` (per op, the case dtypes its variants are built for) and `NOT_GENERATED` (the ops with a
reference kernel but no generator, and why).
"""
from __future__ import annotations

from acelera.conformance import (  # noqa: F401  (importing a family registers its generators)
    generators_custom,
    generators_math,
    generators_movement,
    generators_nn,
    generators_recurrent,
    generators_shapes,
    generators_stablehlo,
)
from acelera.conformance.generators_kit import DTYPES, NOT_GENERATED

__all__ = ["DTYPES", "NOT_GENERATED"]
