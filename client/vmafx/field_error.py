"""The one error type that names the field it is about.

Bad input gets a typed error naming the field (STYLE.md): a model's
``model_dict.slopes``, a feature's ``adm.adm_enhn_gain_limit``, a config's
``limits.max_clients``, a buffer's ``planes[1].fd``.  Every such error in
vmafx and vmafxd is a :class:`FieldError` or a thin subclass kept for
catching one kind apart.  ``str(e)`` is ``"FIELD: REASON"``; code that
re-files an error under another field reads :attr:`FieldError.reason`
rather than taking the message apart.

It sits here, in the foundation both sides of the socket stand on, because
the lowest layers that raise it (``vmafxd.features``, ``vmafxd.model``)
import nothing else of vmafxd.  Imports only the standard library.
"""

from __future__ import annotations

__all__ = ["FieldError"]


class FieldError(ValueError):
    """Something named ``field`` is wrong; ``reason`` says what."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason
