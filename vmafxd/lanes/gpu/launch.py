"""Kernel launches with their argument buffer packed once.

Measured on the H200 (docs/gpu-runs.md): packing a fresh pointer array for
every launch cost 22.9 µs a launch from Python, three times a bare
``cuLaunchKernel``.  A :class:`Launcher` owns one argument record per kernel
signature: values are written in place and the same pointer array is handed
to the driver each time (the driver copies the values during the call).

A batch's launches go further (:class:`PreparedBatches`): their arguments
depend on the batch size and on addresses in the batch's one allocation, so
each launch is packed once per batch size (:class:`Prepared`, its own record)
and a batch writes only its addresses (:class:`Relative`: base + offset).
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

__all__ = ["Launcher", "Prepared", "PreparedBatches", "Relative", "U64", "I64", "I32", "F64", "F32"]

U64 = np.dtype(np.uint64)
I64 = np.dtype(np.int64)
I32 = np.dtype(np.int32)
F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)

#: struct codes of one 8-byte argument slot per type
_CODES = {U64: "Q", I64: "q", I32: "i4x", F64: "d", F32: "f4x"}


class Launcher:
    """``launcher(grid, block, stream, *values, shared=0)`` launches ``function`` with typed values."""

    def __init__(self, device, function, types: Sequence[np.dtype], *, shared: int = 0):
        self.device = device
        self.function = function
        self.shared = shared
        self.types = tuple(np.dtype(t) for t in types)
        # one 8-byte slot per argument (every kernel parameter here is <= 8 bytes)
        self._record = np.zeros(len(types), dtype=np.uint64)
        self._views = [self._record[i:i + 1].view(t) for i, t in enumerate(types)]
        # all values in one C call (struct) into the 8-byte slots, a narrower value in the slot's
        # low bytes (native order, as the views write it); anything struct refuses (a float for an
        # int, a negative for an unsigned) goes through the views, which cast as numpy does
        codes = [_CODES.get(t) for t in self.types]
        self._pack = struct.Struct("=" + "".join(codes)).pack_into if None not in codes else None
        base = self._record.ctypes.data
        self._ptrs = np.array([base + 8 * i for i in range(len(types))], dtype=np.uint64)
        self.args_address = int(self._ptrs.ctypes.data)

    def __call__(self, grid, block, stream, *values, shared: int | None = None) -> None:
        self._pack_into(self._record, self._views, values)
        self.device.launch_packed(self.function, grid, block, self.shared if shared is None else shared,
                                  stream, self.args_address, self.types)

    def _pack_into(self, record: np.ndarray, views: list, values: Sequence) -> None:
        if len(values) != len(views):
            raise TypeError(f"kernel takes {len(views)} arguments, got {len(values)}")
        try:
            if self._pack is None:
                raise TypeError
            self._pack(record, 0, *values)
        except (struct.error, TypeError):
            for view, v in zip(views, values):
                view[0] = v

    def prepare(self, grid, block, values: Sequence, *, shared: int | None = None) -> "Prepared":
        """This kernel's launch with ``values`` packed once, into a record of its own; a
        :class:`Relative` value is an address in a batch's memory, filled in by each call."""
        return Prepared(self, grid, block, values, self.shared if shared is None else shared)


class Relative:
    """An address ``offset`` bytes into a batch's memory, whose base is known per batch only.

    Adding an int gives another (``base + a + b`` is ``(base + a) + b``);
    nothing else is defined, so arithmetic that would not hold for the real
    address (scaling, division) fails loudly instead of packing a wrong value.
    """

    __slots__ = ("offset",)

    def __init__(self, offset: int = 0):
        self.offset = int(offset)

    def __add__(self, other: int) -> "Relative":
        if not isinstance(other, (int, np.integer)) or isinstance(other, bool):
            return NotImplemented
        return Relative(self.offset + int(other))

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"Relative({self.offset})"


class Prepared:
    """``prepared(stream, base)``: one launch whose arguments are all known but a base address.

    A batch's launches depend on its size and on where its memory is, and
    that memory is one allocation laid out the same way for every batch of a
    size: so each launch's arguments are packed once per batch size, and a
    batch writes only ``base + offset`` into the :class:`Relative` slots (a
    few 8-byte stores) before the launch.  The driver copies the arguments
    during the launch call, so the record is free again when the call returns.
    """

    def __init__(self, launcher: Launcher, grid, block, values: Sequence, shared: int):
        self.device, self.function, self.types = launcher.device, launcher.function, launcher.types
        self.grid, self.block, self.shared = tuple(grid), tuple(block), shared
        relative = [(i, v.offset) for i, v in enumerate(values) if isinstance(v, Relative)]
        for i, _ in relative:
            if launcher.types[i] != U64:
                raise TypeError(f"argument {i} is an address in the batch: it must be U64, not {launcher.types[i]}")
        record = np.zeros(len(launcher.types), dtype=np.uint64)
        plain = [v.offset if isinstance(v, Relative) else v for v in values]
        launcher._pack_into(record, [record[i:i + 1].view(t) for i, t in enumerate(launcher.types)], plain)
        self._record = record
        #: (index, offset) of each address in the batch's memory
        self._relative = tuple(relative)
        base = record.ctypes.data
        self._ptrs = np.array([base + 8 * i for i in range(len(record))], dtype=np.uint64)
        self.args_address = int(self._ptrs.ctypes.data)

    def __call__(self, stream, base: int) -> None:
        record = self._record
        for i, offset in self._relative:
            record[i] = base + offset
        self.device.launch_packed(self.function, self.grid, self.block, self.shared, stream,
                                  self.args_address, self.types)


class PreparedBatches:
    """A feature's launches for a batch, prepared once per key (batch size and layout).

    ``make(*key)`` yields ``(launcher, grid, block, values)`` per launch, in
    order, with :class:`Relative` addresses into the batch's memory (``key``
    must hold every other value the launches depend on); ``run(stream, base,
    *key)`` launches them for a batch whose memory starts at ``base``.
    """

    #: keys kept (a session sees its batch sizes, 1 .. its largest: up to 128 with
    #: ``gpu_batch = "auto"``, and motion's leading batches besides)
    LIMIT = 256

    def __init__(self, make):
        self._make = make
        self._got: dict[tuple, list[Prepared]] = {}

    def run(self, stream, base: int, *key) -> None:
        launches = self._got.get(key)
        if launches is None:
            if len(self._got) >= self.LIMIT:
                self._got.clear()
            launches = self._got[key] = [launcher.prepare(grid, block, values)
                                         for launcher, grid, block, values in self._make(*key)]
        for launch in launches:
            launch(stream, base)
