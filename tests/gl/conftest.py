"""GL fixtures: one EGL context for the session, or a clean skip that says why.

Here (CI) that is Mesa's llvmpipe on the surfaceless platform; on the H200 it
is NVIDIA's EGL device platform (``EGL_EXT_platform_device``,
``eglQueryDevicesEXT``), which ``EglOffscreenContext("auto")`` prefers
whenever a hardware EGL device exists.  ``VMAFX_GL_PLATFORM`` forces one of
auto, device, surfaceless, default.  The context is current on the main
thread, where pytest runs the tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import pytest  # noqa: E402

_state: dict = {}


def _context():
    if "ctx" in _state:
        return _state["ctx"]
    if "skip" in _state:
        pytest.skip(_state["skip"])
    reason = None
    try:
        from OpenGL import GL  # noqa: F401  -- PyOpenGL and its GL library
    except Exception as e:  # ImportError, OSError, PyOpenGL's NullFunctionError ...
        reason = (f"PyOpenGL or a GL library is missing ({type(e).__name__}: {e}); install vmafxd[gl] and Debian's "
                  "libegl1 libgl1 libopengl0 libegl-mesa0 libgl1-mesa-dri (scripts/bootstrap.sh test)")
    if reason is None:
        from vmafx import gl as vg

        platform = os.environ.get("VMAFX_GL_PLATFORM", "auto")
        try:
            ctx = vg.EglOffscreenContext(platform, trace=print)
        except vg.GlExportError as e:
            reason = f"no EGL desktop-GL context on the {platform!r} platform: {e}"
        else:
            print(ctx.info().describe())
            _state["ctx"] = ctx
            return ctx
    _state["skip"] = reason
    pytest.skip(reason)


@pytest.fixture(scope="session")
def egl_session():
    ctx = _context()
    yield ctx
    _state.pop("ctx", None)
    ctx.close()


@pytest.fixture
def egl(egl_session):
    """The session's EGL context, current on this thread."""
    egl_session.make_current()
    return egl_session
