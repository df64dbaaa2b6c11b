"""The GL producers' errors: each a VmafxError with the protocol's code and the field it names."""

from __future__ import annotations

from typing import ClassVar

from ..exceptions import LayoutError, VmafxError
from ..protocol.errors import ErrorCode


class GlExportError(VmafxError):
    """A GL export refused in the producer's process (never the daemon's doing): code, field, message."""

    CODE: ClassVar[ErrorCode] = ErrorCode.E_INTERNAL

    def __init__(self, field: str, message: str):
        VmafxError.__init__(self, self.CODE, field, message)


class GlNotSupported(GlExportError):
    """E_NOTSUP: valid, but this display, driver or flag set cannot do it; ``field`` names what is missing."""

    CODE = ErrorCode.E_NOTSUP


class GlBusy(GlExportError):
    """E_BUSY: the acquire sync has not signalled (or the buffer is not released yet): try again."""

    CODE = ErrorCode.E_BUSY


class GlTimeout(GlExportError):
    """E_TIMEOUT: a bounded wait (acquire sync, copy fence, implicit dma-buf fences) ran out."""

    CODE = ErrorCode.E_TIMEOUT


class GlWrongState(GlExportError):
    """E_STATE: no EGL context is current, or not the exporter's, or the exporter is closed."""

    CODE = ErrorCode.E_STATE


class GlInvalid(GlExportError, LayoutError):
    """E_INVAL: a texture (``planes[i]``), sync or layout the caller gave is wrong.  Also a LayoutError."""

    CODE = ErrorCode.E_INVAL
