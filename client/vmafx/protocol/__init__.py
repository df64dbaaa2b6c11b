"""The vmafxd wire protocol, sans I/O: messages, state tables, limits and typed errors.

Imports only the standard library, msgpack and the foundation's formats
(tests/test_layers.py checks that importing it loads no trio, numpy, GPU
binding, vmafxd or producer-side module).
"""

from . import codec, messages
from .codec import *  # noqa: F401,F403  (encode, decode and the rest of the wire form)
from .errors import ErrorCode, FATAL_CODES, LocalProtocolError, ProtocolError, RemoteProtocolError
from .limits import PROTOCOL_VERSION, Limits
from .messages import *  # noqa: F401,F403  (the message classes are the protocol's vocabulary)
from .state import ClientConnection, ClientFrameLedger, ServerConnection, State, check_packet

__all__ = [
    "messages", "ErrorCode", "FATAL_CODES", "LocalProtocolError", "ProtocolError", "RemoteProtocolError",
    "PROTOCOL_VERSION", "Limits", "ClientConnection", "ClientFrameLedger", "ServerConnection", "State",
    "check_packet", "codec", *messages.__all__, *codec.__all__,
]
