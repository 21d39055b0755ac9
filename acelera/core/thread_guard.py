"""One Interpreter, one thread at a time: concurrent use is detected and refused.

An interpreter holds one set of input and output buffers, so two threads sharing it mix each
other's inputs and read each other's outputs, silently. acelera refuses that instead of
serializing it (a lock around each call would still let thread A's outputs be overwritten by
thread B's invoke before A reads them):

- a call made while another thread is inside a call on the same interpreter raises
  ConcurrentUseError at once (it never waits);
- a thread that set inputs or invoked *owns* the interpreter until it reads an output after
  its invoke (or until it exits); set_tensor, resize, invoke or get_tensor from another thread
  meanwhile raises ConcurrentUseError naming both threads.

Sequential use from several threads (a pool whose tasks each set, invoke and read) works.
Use one Interpreter per thread for parallel inference; interpreters never share state.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from acelera.core.errors import AceleraError


class ConcurrentUseError(AceleraError, RuntimeError):
    """An Interpreter was used from two threads at once."""


def _name(t: threading.Thread) -> str:
    return f"'{t.name}'"


class ThreadGuard:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owner: threading.Thread | None = None
        self._invoked = False

    def enter(self, what: str, opens: bool = False, invokes: bool = False) -> None:
        """Start one public call (refused at once when another thread is inside or owns the
        interpreter). `opens`: it sets inputs (set_tensor, resize); `invokes`: it runs the graph.
        Every successful enter() is paired with leave()."""
        me = threading.current_thread()
        if not self._lock.acquire(False):
            raise ConcurrentUseError(
                f"Interpreter.{what}() called from thread {_name(me)} while another thread is inside a call on "
                "the same Interpreter: use one Interpreter per thread, or serialize set_tensor/invoke/get_tensor "
                "with your own lock")
        owner = self._owner
        if owner is not None and owner is not me and owner.is_alive():
            self._lock.release()
            raise ConcurrentUseError(
                f"Interpreter.{what}() called from thread {_name(me)} while thread {_name(owner)} has set inputs "
                f"or invoked and not yet read its outputs: use one Interpreter per thread, or hold a lock around "
                f"set_tensor -> invoke -> get_tensor")
        if opens or invokes:
            self._owner = me

    def leave(self, ok: bool, opens: bool = False, invokes: bool = False, reads: bool = False) -> None:
        """End the call enter() started; `ok`: it returned normally. `reads`: it read a tensor,
        which ends the owner's turn after an invoke."""
        if ok:
            if invokes:
                self._invoked = True
            elif opens:
                self._invoked = False
            elif reads and self._invoked and self._owner is threading.current_thread():
                self._owner, self._invoked = None, False
        self._lock.release()

    @contextmanager
    def call(self, what: str, *, opens: bool = False, invokes: bool = False, reads: bool = False) -> Iterator[None]:
        """enter() and leave() around a block."""
        self.enter(what, opens, invokes)
        ok = False
        try:
            yield
            ok = True
        finally:
            self.leave(ok, opens, invokes, reads)
