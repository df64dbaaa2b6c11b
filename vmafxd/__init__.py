"""vmafxd: VMAF as a system service -- the daemon and the scoring core."""

from vmafx import __version__

__all__ = ["__version__"]
