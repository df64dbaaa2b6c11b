"""The current EGL context and display: their extensions, the display's device, its DRM nodes,
and R11's checks that the display exports dma-bufs from the daemon device's GPU (PCI locations)."""

from __future__ import annotations

import ctypes
import os
import re
import stat
from dataclasses import dataclass
from typing import Iterable

from .constants import (
    EGL_CLIENT_APIS, EGL_CUDA_DEVICE_NV, EGL_DEVICE_EXT, EGL_DRM_DEVICE_FILE_EXT, EGL_DRM_RENDER_NODE_FILE_EXT,
    EGL_EXTENSIONS, EGL_VENDOR, EGL_VERSION,
)
from .entry_points import _egl, _egl_error, _egl_lib, _sz
from .errors import GlInvalid, GlNotSupported, GlWrongState


def current_egl() -> tuple[int, int]:
    """(display, context) current on this thread, or ``E_STATE`` naming ``context``.

    R11 reads the textures of the *EGL* context current on the calling thread: a
    GLX context (or none) has no EGL display to export through.
    """
    lib = _egl_lib()
    ctx = lib.eglGetCurrentContext()
    dpy = lib.eglGetCurrentDisplay()
    if not ctx or not dpy:
        raise GlWrongState("context", "no EGL context is current on this thread (make the producer's EGL context "
                           "current; GLX contexts cannot be exported)")
    return dpy, ctx


def _client_extensions() -> frozenset[str]:
    s = _egl_lib().eglQueryString(None, EGL_EXTENSIONS)
    if not s:
        _egl_error()  # EGL_BAD_DISPLAY when client extensions are not supported: clear it
        return frozenset()
    return frozenset(s.decode().split())


def _display_extensions(display: int) -> frozenset[str]:
    s = _egl_lib().eglQueryString(display, EGL_EXTENSIONS)
    return frozenset((s or b"").decode().split())


@dataclass(frozen=True)
class EglDisplayInfo:
    """What an EGL display is and offers (printed by the tests and the script to diagnose a run)."""

    display: int
    vendor: str
    version: str
    client_apis: str
    extensions: frozenset[str]
    client_extensions: frozenset[str]
    device: int | None
    device_extensions: frozenset[str]
    drm_device_file: str | None
    drm_render_node: str | None
    cuda_device: int | None

    def describe(self) -> str:
        lines = [f"EGL display 0x{self.display:x}: vendor {self.vendor!r}, version {self.version!r}, "
                 f"client APIs {self.client_apis!r}",
                 f"  client extensions: {' '.join(sorted(self.client_extensions)) or '-'}",
                 f"  display extensions: {' '.join(sorted(self.extensions)) or '-'}",
                 f"  EGL device: {hex(self.device) if self.device else None}; device extensions: "
                 f"{' '.join(sorted(self.device_extensions)) or '-'}",
                 f"  DRM device file: {self.drm_device_file}; DRM render node: {self.drm_render_node}; "
                 f"CUDA device: {self.cuda_device}",
                 f"  EGL_MESA_image_dma_buf_export: {'EGL_MESA_image_dma_buf_export' in self.extensions}; "
                 f"EGL_EXT_image_dma_buf_import: {'EGL_EXT_image_dma_buf_import' in self.extensions}; "
                 f"EGL_KHR_reusable_sync: {'EGL_KHR_reusable_sync' in self.extensions}"]
        return "\n".join(lines)


def _query_device_string(dev: int, name: int) -> str | None:
    s = _egl().eglQueryDeviceStringEXT(dev, name)
    if not s:
        _egl_error()  # EGL_BAD_PARAMETER where the device has no such string: clear it
        return None
    return s.decode(errors="replace")


def _display_device(display: int) -> tuple[int | None, frozenset[str]]:
    """The display's EGLDevice and its extensions (EGL_EXT_device_query), or (None, {})."""
    if not ({"EGL_EXT_device_query", "EGL_EXT_device_base"} & _client_extensions()):
        return None, frozenset()
    dev = _sz(0)
    if not _egl().eglQueryDisplayAttribEXT(display, EGL_DEVICE_EXT, ctypes.byref(dev)) or not dev.value:
        _egl_error()
        return None, frozenset()
    return dev.value, frozenset((_query_device_string(dev.value, EGL_EXTENSIONS) or "").split())


def _device_cuda_ordinal(dev: int, exts: frozenset[str]) -> int | None:
    if "EGL_NV_device_cuda" not in exts:
        return None
    v = _sz(-1)
    if not _egl().eglQueryDeviceAttribEXT(dev, EGL_CUDA_DEVICE_NV, ctypes.byref(v)):
        _egl_error()
        return None
    return int(v.value)


def egl_display_info(display: int | None = None) -> EglDisplayInfo:
    """What the display (default: the current one) is; never raises for a missing device."""
    lib = _egl_lib()
    if display is None:
        display = current_egl()[0]
    q = lambda n: (lib.eglQueryString(display, n) or b"").decode(errors="replace")  # noqa: E731
    dev, dexts = _display_device(display)
    drm = node = None
    cuda = None
    if dev:
        if "EGL_EXT_device_drm" in dexts:
            drm = _query_device_string(dev, EGL_DRM_DEVICE_FILE_EXT)
        if "EGL_EXT_device_drm_render_node" in dexts:
            node = _query_device_string(dev, EGL_DRM_RENDER_NODE_FILE_EXT)
        cuda = _device_cuda_ordinal(dev, dexts)
    return EglDisplayInfo(display, q(EGL_VENDOR), q(EGL_VERSION), q(EGL_CLIENT_APIS), _display_extensions(display),
                          _client_extensions(), dev, dexts, drm, node, cuda)


# ------------------------------------------------------------------------- R11's checks, one function each

def require_dma_buf_export(display: int) -> None:
    """``E_NOTSUP`` naming ``EGL_MESA_image_dma_buf_export`` when the display cannot export dma-bufs (R11)."""
    exts = _display_extensions(display)
    if "EGL_MESA_image_dma_buf_export" not in exts:
        raise GlNotSupported("EGL_MESA_image_dma_buf_export",
                             "the EGL display does not offer EGL_MESA_image_dma_buf_export, so its textures cannot "
                             "be exported as dma-bufs (R11, ADR-2132)")
    if "EGL_KHR_image_base" not in exts or "EGL_KHR_gl_texture_2D_image" not in exts:
        raise GlNotSupported("EGL_KHR_gl_texture_2D_image",
                             "the EGL display cannot make an EGLImage of a GL texture (EGL_KHR_image_base, "
                             "EGL_KHR_gl_texture_2D_image), which the dma-buf export starts from")


def _render_node_of_primary(primary: str, sysfs_root: str = "/sys") -> str | None:
    try:
        st = os.stat(primary)
    except OSError:
        return None
    d = os.path.join(sysfs_root, "dev", "char", f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", "device", "drm")
    try:
        nodes = sorted(n for n in os.listdir(d) if n.startswith("renderD"))
    except OSError:
        return None
    return f"/dev/dri/{nodes[0]}" if nodes else None


def display_render_node(display: int) -> str:
    """The DRM render node of the display's device, or ``E_NOTSUP`` naming ``display`` (R11, ADR-2132 item 4).

    A display without a DRM device (Mesa's software device; NVIDIA's device
    platform where no /dev/dri exists) is refused, not waved through: the GPU
    check and the GBM allocation both need the node.
    """
    if not ({"EGL_EXT_device_query", "EGL_EXT_device_base"} & _client_extensions()):
        raise GlNotSupported("display", "EGL_EXT_device_query is missing, so the display's DRM device cannot be "
                             "found; R11 refuses rather than skip the device check")
    dev, dexts = _display_device(display)
    if not dev:
        raise GlNotSupported("display", "the EGL display reports no EGL device (eglQueryDisplayAttribEXT("
                             "EGL_DEVICE_EXT) failed); R11 refuses a display without a DRM device")
    node = None
    if "EGL_EXT_device_drm_render_node" in dexts:
        node = _query_device_string(dev, EGL_DRM_RENDER_NODE_FILE_EXT)
    primary = _query_device_string(dev, EGL_DRM_DEVICE_FILE_EXT) if "EGL_EXT_device_drm" in dexts else None
    if not node and primary:
        node = _render_node_of_primary(primary)
    if not node:
        raise GlNotSupported("display", "the EGL display has no DRM device (device extensions: "
                             f"{' '.join(sorted(dexts)) or 'none'}; render node: none; DRM device file: {primary}); "
                             "R11 refuses a display without a DRM device")
    return node


_PCI_RE = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def _pci_key(text: str) -> tuple[int, int, int, int] | None:
    m = _PCI_RE.match(text.strip()) if text else None
    if not m:
        return None
    dom, bus, dev, fn = m.groups()
    return int(dom or "0", 16), int(bus, 16), int(dev, 16), int(fn)


def same_pci(a: str, b: str) -> bool:
    """Whether two PCI locations name the same function ("0000:3B:00.0" == "00000000:3b:00.0")."""
    ka, kb = _pci_key(a), _pci_key(b)
    return ka is not None and ka == kb


def pci_location_of_char_device(major: int, minor: int, sysfs_root: str = "/sys") -> str:
    """The PCI location of a character device from ``/sys/dev/char/MAJ:MIN/device``, or ``E_NOTSUP`` naming ``device``."""
    link = os.path.join(sysfs_root, "dev", "char", f"{major}:{minor}", "device")
    if not os.path.exists(link):
        raise GlNotSupported("device", f"{link} does not exist: the device {major}:{minor} has no bus device, "
                             "so its PCI location is unknown")
    real = os.path.realpath(link)
    name = os.path.basename(real)
    if _pci_key(name) is None:
        raise GlNotSupported("device", f"the device {major}:{minor} is not a PCI device ({real})")
    return name


def render_node_pci(node: str, sysfs_root: str = "/sys") -> str:
    """The PCI location (``0000:3b:00.0``) of a DRM render node."""
    try:
        st = os.stat(node)
    except OSError as e:
        raise GlNotSupported("display", f"the render node {node} cannot be opened ({e.strerror})") from None
    if not stat.S_ISCHR(st.st_mode):
        raise GlNotSupported("display", f"the render node {node} is not a character device")
    return pci_location_of_char_device(os.major(st.st_rdev), os.minor(st.st_rdev), sysfs_root)


# ------------------------------------------------------------------------------------- the daemon device

@dataclass(frozen=True)
class DaemonDevice:
    """The daemon device that will read the frames: its lane, ordinal and PCI location (``hello_reply``)."""

    lane: str
    index: int = 0
    pci: str | None = None
    name: str | None = None

    @classmethod
    def from_lanes(cls, lanes: Iterable[dict], lane: str | None = None, device: int = 0) -> "DaemonDevice":
        """Pick ``lane``'s ``device`` from ``hello_reply.lanes`` (default: the first GPU lane, else cpu)."""
        lanes = list(lanes)
        order = [e for e in lanes if (e.get("lane") == lane if lane else e.get("lane") != "cpu")]
        if lane is None:
            order += [e for e in lanes if e.get("lane") == "cpu"]
        for entry in order:
            for d in entry.get("devices", ()) or ():
                if d.get("device") == device:
                    return cls(str(entry.get("lane")), device, d.get("pci"), d.get("name"))
        have = [(e.get("lane"), [d.get("device") for d in e.get("devices", ()) or ()]) for e in lanes]
        raise GlInvalid("device", f"the daemon has no {lane or 'GPU'} lane device {device} (lanes: {have})")


def require_same_device(node_pci: str, device: DaemonDevice, what: str = "the EGL display's render node") -> None:
    """``E_NOTSUP`` naming ``device`` unless ``node_pci`` is the daemon device's PCI location (R11)."""
    if device.lane == "cpu":
        # The cpu lane reads a dma-buf through a host mapping: any GPU's buffer is as readable as
        # another's, so there is no device to match (and that read is a host copy, ALLOW_COPY).
        return
    if not device.pci:
        raise GlNotSupported("device", f"the daemon's {device.lane} device {device.index} reports no PCI location, "
                             f"so {what} ({node_pci}) cannot be shown to be on it")
    if not same_pci(node_pci, device.pci):
        raise GlNotSupported("device", f"{what} is the GPU at {node_pci}, but the daemon's {device.lane} device "
                             f"{device.index} ({device.name or '?'}) is at {device.pci}: another GPU's dma-bufs "
                             "are refused (R11)")
