"""Video file readers (y4m, raw yuv) and libvmaf-format score writers."""

from .video import VideoInfo, VideoReader, open_video

__all__ = ["VideoInfo", "VideoReader", "open_video"]
