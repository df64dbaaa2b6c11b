"""Kernel launches with their argument buffer packed once.

Measured on the H200 (docs/gpu-runs.md): packing a fresh pointer array for
every launch cost 22.9 µs a launch from Python, three times a bare
``cuLaunchKernel``.  A :class:`Launcher` owns one argument record per kernel
signature: values are written in place and the same pointer array is handed
to the driver each time (the driver copies the values during the call).
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

__all__ = ["Launcher", "U64", "I64", "I32", "F64", "F32"]

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
        if len(values) != len(self._views):
            raise TypeError(f"kernel takes {len(self._views)} arguments, got {len(values)}")
        try:
            if self._pack is None:
                raise TypeError
            self._pack(self._record, 0, *values)
        except (struct.error, TypeError):
            for view, v in zip(self._views, values):
                view[0] = v
        self.device.launch_packed(self.function, grid, block, self.shared if shared is None else shared,
                                  stream, self.args_address, self.types)
