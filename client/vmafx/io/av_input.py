"""Any container and codec FFmpeg reads, through PyAV, decoded frame by frame to stored planes.

Planar YUV at 8 or 10 bits (4:2:0, 4:2:2, 4:4:4) and grey are copied out of the decoded
frame as they are (only the row padding is dropped); any other pixel format (nv12,
yuvj420p, rgb24, 12-bit, ...) is converted by FFmpeg's scaler (``VideoFrame.reformat``)
to the nearest planar YUV format the lanes take.  ``Scaler`` resizes a frame with FFmpeg's
scaler too: what ``--scale FLAGS`` uses to bring a distorted clip to the reference's size.
"""

from __future__ import annotations

import numpy as np

from ..formats import SCALE_FLAGS, PixelFormat, storage_planes
from .input import Input, InputError
from .video import VideoInfo

__all__ = ["open_av", "Scaler", "SCALE_FLAGS", "planes_to_frame"]

# FFmpeg pix_fmt -> (our planar format, bit depth); anything else is converted
_DIRECT = {
    "yuv420p": (PixelFormat.YUV420P, 8), "yuv422p": (PixelFormat.YUV422P, 8), "yuv444p": (PixelFormat.YUV444P, 8),
    "yuv420p10le": (PixelFormat.YUV420P, 10), "yuv422p10le": (PixelFormat.YUV422P, 10),
    "yuv444p10le": (PixelFormat.YUV444P, 10), "gray": (PixelFormat.YUV400P, 8), "gray10le": (PixelFormat.YUV400P, 10),
}
_FF_NAME = {v: k for k, v in _DIRECT.items()}

_TEXT_FORMATS = ("tty",)
_TEXT_CODECS = ("ansi", "bintext", "xbin", "idf")


def _nearest(name: str) -> str:
    """The planar format a non-planar/odd format converts to (keeps chroma layout and depth class)."""
    deep = any(t in name for t in ("10", "12", "14", "16"))
    if name.startswith(("gray", "ya")):
        return "gray10le" if deep else "gray"
    if "444" in name or name.startswith(("rgb", "bgr", "gbr", "argb", "abgr", "rgba", "bgra", "x2rgb", "0rgb")):
        return "yuv444p10le" if deep else "yuv444p"
    if "422" in name or name.startswith(("yuyv", "uyvy", "yvyu", "nv16", "y210")):
        return "yuv422p10le" if deep else "yuv422p"
    return "yuv420p10le" if deep or name.startswith("p010") else "yuv420p"


def _frame_planes(frame, fmt: PixelFormat, depth: int) -> list[np.ndarray]:
    dtype = np.dtype(np.uint8) if depth == 8 else np.dtype("<u2")
    out = []
    for plane, shape in zip(frame.planes, storage_planes(fmt, frame.width, frame.height, depth)):
        row = plane.line_size // dtype.itemsize
        arr = np.frombuffer(plane, dtype, row * shape.height).reshape(shape.height, row)
        out.append(np.ascontiguousarray(arr[:, : shape.width]))
    return out


def planes_to_frame(planes, info: VideoInfo):
    """Stored planes -> a PyAV VideoFrame (to run FFmpeg's scaler on y4m/raw input)."""
    import av

    frame = av.VideoFrame(info.width, info.height, _FF_NAME[(info.pixel_format, info.bitdepth)])
    for plane, arr in zip(frame.planes, planes):
        row = plane.line_size // arr.dtype.itemsize
        buf = np.zeros((arr.shape[0], row), arr.dtype)
        buf[:, : arr.shape[1]] = arr
        plane.update(buf.tobytes())
    return frame


class Scaler:
    """Resize frames to ``width`` x ``height`` with FFmpeg's scaler (``flags`` as ``scale=flags=``)."""

    def __init__(self, flags: str, width: int, height: int):
        import av.video.reformatter as rf

        self.width, self.height = width, height
        self.interpolation = getattr(rf.Interpolation, SCALE_FLAGS[flags])

    def __call__(self, planes, info: VideoInfo) -> list[np.ndarray]:
        frame = planes_to_frame(planes, info)
        out = frame.reformat(width=self.width, height=self.height, interpolation=self.interpolation)
        return _frame_planes(out, info.pixel_format, info.bitdepth)


def open_av(path: str):
    """Open ``path`` with PyAV; an :class:`Input` that decodes its first video stream as read."""

    try:
        import av
    except ImportError:
        raise InputError(f"{path}: not y4m or raw .yuv, and PyAV (the 'av' package) is not installed "
                         f"to decode it") from None
    try:
        container = av.open(path)
    except (av.error.FFmpegError, OSError, ValueError) as e:
        raise InputError(f"{path}: not a video file FFmpeg can read ({_why(e)})") from None
    if not container.streams.video:
        container.close()
        raise InputError(f"{path}: has no video stream")
    stream = container.streams.video[0]
    if container.format.name in _TEXT_FORMATS or stream.codec_context.name in _TEXT_CODECS:
        # FFmpeg renders any text file as ANSI art ("tty" demuxer): that is not a video
        container.close()
        raise InputError(f"{path}: not a video file FFmpeg can read (it looks like text)")
    stream.thread_type = "AUTO"
    frames = container.decode(stream)
    try:
        first = next(frames)
    except StopIteration:
        container.close()
        raise InputError(f"{path}: has a video stream but no frame could be decoded") from None
    except (av.error.FFmpegError, ValueError) as e:
        container.close()
        raise InputError(f"{path}: cannot decode its video ({_why(e)})") from None
    name = first.format.name
    target = name if name in _DIRECT else _nearest(name)
    fmt, depth = _DIRECT[target]
    rate = stream.average_rate or stream.guessed_rate
    fps = (rate.numerator, rate.denominator) if rate else None
    info = VideoInfo(first.width, first.height, fmt, depth, fps)
    pending = [first]

    def nxt():
        if pending:
            frame = pending.pop()
        else:
            try:
                frame = next(frames)
            except StopIteration:
                return None
            except (av.error.FFmpegError, ValueError) as e:
                raise InputError(f"{path}: decoding failed after {reader.frames_read} frames ({_why(e)})") from None
        if (frame.width, frame.height) != (info.width, info.height):
            raise InputError(f"{path}: frame {reader.frames_read} is {frame.width}x{frame.height}, "
                             f"the stream started at {info.width}x{info.height}")
        if frame.format.name != target:
            frame = frame.reformat(format=target)
        return _frame_planes(frame, fmt, depth)

    total = stream.frames or None
    reader = Input(path, info, nxt, container.close, total=total)
    return reader


def _why(e: Exception) -> str:
    text = getattr(e, "strerror", None) or str(e)
    return str(text).split("\n")[0]
