"""The benchmark's errors: AceleraError subclasses with one-line messages (TFLite logs and
returns a status instead)."""
from __future__ import annotations

from acelera.core.errors import AceleraError
from acelera.core.partition import DelegationError
from acelera.registrar.flags import FlagValueError


class BenchmarkError(AceleraError):
    """The benchmark could not run (bad input data, unsupported input type, failed run)."""


class BenchmarkParamError(BenchmarkError):
    """A benchmark flag has an invalid value; the message names the flag."""


class BenchmarkRangeError(BenchmarkParamError, FlagValueError):
    """A numeric benchmark flag is not finite or outside its range (BENCHMARK_RANGES): a usage
    error, exit code 2 on the command line."""


#: `--require_full_delegation` failures are DelegationErrors ("Disallowed CPU fallback detected").
DisallowedCpuFallback = DelegationError
