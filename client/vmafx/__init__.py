"""vmafx: the client library of vmafxd (VMAF as a system service)."""

__version__ = "0.1.0"
