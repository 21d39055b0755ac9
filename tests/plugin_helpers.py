"""Test plugins shared by the registrar, hooks, CLI and conformance tests (no tests here):
a stand-in entry point, minimal delegates, plugin modules built from a spec, the example
third-party plugin loaded from its file."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import numpy as np

from acelera.core.delegate import Delegate, OpSupport, OpTable, Support
from acelera.core.subplan import ReferenceKernel, reference_factory
from acelera.registrar import hookimpl
from acelera.registrar.flags import Flag
from acelera.registrar.spec import DelegateSpec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "third_party_delegate" / "acelera_example.py"
F32 = frozenset({"FLOAT32"})


class EP:
    """A stand-in for importlib.metadata.EntryPoint."""

    def __init__(self, name, obj, dist="fake-dist"):
        self.name = name
        self._obj = obj
        self.dist = types.SimpleNamespace(name=dist, version="9.9")

    def load(self):
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


class Echo(Delegate):
    def prepare(self, partition):
        return ReferenceKernel(partition)


def plugin(name, flags=(), ops=("ADD",), available=True, enabled_by=None, **spec_kw):
    flag = f"use_{name.replace('-', '_')}"
    all_flags = (Flag(flag, bool, False, f"enable {name}", name, name), *flags)

    def factory(options):
        d = Echo()
        d.name = name
        d.op_table = OpTable.of([OpSupport(o, 3) for o in ops], name)
        d.options = dict(options)
        return d

    spec = DelegateSpec(name, f"{name} test delegate", "1.0", all_flags, enabled_by or (flag,),
                        OpTable.of([OpSupport(o, 3) for o in ops], name), frozenset({"float32"}), "cpu",
                        (lambda: Support(True)) if available else (lambda: Support(False, "no device")), factory,
                        **spec_kw)
    mod = types.SimpleNamespace(__name__=f"plug_{name}")

    @hookimpl
    def register_delegates(register):
        register(spec)
    mod.register_delegates = register_delegates
    return mod


def load_example():
    spec = importlib.util.spec_from_file_location("acelera_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- test delegates ------------------------------------------------------------------------
class TestDelegate(Delegate):
    """Runs partitions on the reference kernels, optionally perturbing one op or failing to prepare."""

    __test__ = False
    backend = "cpu"

    def __init__(self, name, table, perturb=None, cannot=None, accept_all=False, jitter=False):
        super().__init__()
        self.name, self.op_table = name, table
        self.perturb, self.cannot, self.accept_all, self.jitter = perturb, cannot, accept_all, jitter
        self.rng = np.random.default_rng()

    def is_node_supported(self, node):
        return Support(True) if self.accept_all else super().is_node_supported(node)

    def prepare(self, partition):
        ops = {partition.contexts[n].op.name for n in partition.nodes}
        if self.cannot in ops:
            raise NotImplementedError(f"{self.cannot} is not implemented on this device")

        def factory(ctx):
            fn = reference_factory(ctx)
            if ctx.op.name != self.perturb and not self.jitter:
                return fn

            def run(*args):
                out = fn(*args)
                if out.dtype.kind == "f":
                    return out + np.asarray(self.rng.uniform(0, 1e-3) if self.jitter else 0.1, out.dtype)
                return out
            return run
        return ReferenceKernel(partition, factory)


def make_plugin(name, rows, *, probe=True, precision=None, model_types=("float32",), **kw):
    table = OpTable.of(rows, name)
    extra = {} if precision is None else {"precision": precision}
    spec = DelegateSpec(name=name, summary=f"{name} test delegate", version="1.2.3", flags=(), enabled_by=(),
                        op_table=table, model_types=frozenset(model_types), backend="cpu",
                        probe=(lambda: Support(True)) if probe is True else (lambda: Support(False, probe)),
                        factory=lambda options: TestDelegate(name, table, **kw), **extra)
    mod = types.SimpleNamespace(register_delegates=hookimpl(lambda register: register(spec)), __name__=f"test_{name}")
    return EP(name, mod, dist=f"acelera-{name}")


BASIC = [OpSupport("ADD", 2, F32), OpSupport("MUL", 2, F32), OpSupport("RELU", 1, F32)]
