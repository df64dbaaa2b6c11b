"""``vmafxctl score``'s command line: libvmaf 3.2's ``vmaf`` options, same spellings and meanings
(``libvmaf/tools/cli_parse.c``), plus vmafx's own (where to score, --scale, --summary, ...).

libvmaf's short options are ``-r -d -w -h -p -b -m -c -o -n -v -q``: ``-h`` is the height, so
help is ``--help`` only.  ``-t`` (threads), ``-s`` (subsample) and ``-f`` (feature) are extra
short spellings libvmaf does not have.  Models and features keep the order they were given
in, presets (``--aom_ctc``, ``--nflx_ctc``) included, because the log's key order follows it.
"""

from __future__ import annotations

import argparse

from .defaults import DEFAULT_SOCKET

__all__ = ["add_score_arguments", "AOM_CTC", "NFLX_CTC", "LibvmafArgumentParser"]


def _aom_v1():
    return (["version=vmaf_v0.6.1:name=vmaf", "version=vmaf_v0.6.1neg:name=vmaf_neg"],
            ["psnr=reduced_hbd_peak=true:enable_apsnr=true:min_sse=0.5", "ciede",
             "float_ssim=enable_db=true:clip_db=true", "float_ms_ssim=enable_db=true:clip_db=true", "psnr_hvs"])


def _aom(version: int):
    models, features = _aom_v1()
    if version >= 3:
        features.append("cambi")
    if version >= 7:  # CHECKED_REPLACE: float_ssim's entry is replaced in place
        features = ["float_ssim=scale=1:enable_db=true:clip_db=true" if f.startswith("float_ssim=") else f
                    for f in features]
    return models, features


#: --aom_ctc VERSION -> (models, features) as cli_parse.c's aom_ctc_vN_0 add them
AOM_CTC = {f"v{v}.0": _aom(v) for v in range(1, 8)}
#: --nflx_ctc VERSION -> (models, features) (nflx_ctc_v1_0)
NFLX_CTC = {"v1.0": (["version=vmaf_4k_v0.6.1:name=vmaf", "version=vmaf_4k_v0.6.1neg:name=vmaf_neg"],
                     ["psnr=enable_chroma=true:enable_apsnr=true", "float_ssim=enable_db=true:clip_db=true",
                      "cambi"])}


class LibvmafArgumentParser(argparse.ArgumentParser):
    """Usage errors as one line naming the flag, exit 2 (argparse prints usage + message)."""

    def error(self, message: str):  # noqa: D401
        import sys

        sys.stderr.write(f"{self.prog}: {message} (see --help)\n")
        raise SystemExit(2)


class _AppendModel(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.model = [*ns.model, value]


class _Preset(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        table = AOM_CTC if option_string == "--aom_ctc" else NFLX_CTC
        if value == "proposed" and table is AOM_CTC:
            parser.error("argument --aom_ctc: `--aom_ctc proposed` is deprecated")
        if value not in table:
            parser.error(f"argument {option_string}: bad version {value!r} (expected one of {', '.join(table)})")
        models, features = table[value]
        ns.model = [*ns.model, *models]
        ns.feature = [*ns.feature, *features]


def number_type(parse, expected: str, ok, must: str | None = None):
    """An argparse ``type``: ``parse(text)``, or an error saying ``expected {expected}`` when it does
    not parse, and ``must`` (formatted with ``value`` and ``text``; by default the same) when
    ``ok(value)`` is false."""

    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value):
            message = f"expected {expected}, got {text!r}" if must is None else must.format(value=value, text=text)
            raise argparse.ArgumentTypeError(message)
        return value

    return convert


_unsigned = number_type(lambda text: int(text, 0), "an unsigned integer", lambda v: v >= 0)


def _positive(text: str) -> int:
    v = _unsigned(text)
    if v == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return v


def _pix_fmt(text: str) -> str:
    if text in ("420", "422", "444", "400"):
        return text
    if text in ("yuv420p", "yuv422p", "yuv444p", "yuv400p", "yuv420p10le", "yuv422p10le", "yuv444p10le",
                "nv12", "p010"):  # vmafx's names, for raw files from capture pipelines
        return text
    raise argparse.ArgumentTypeError(f"expected 420, 422 or 444, got {text!r}")


def _bitdepth(text: str) -> int:
    v = _unsigned(text)
    if v not in (8, 10, 12, 16):
        raise argparse.ArgumentTypeError(f"expected 8, 10, 12 or 16, got {text!r}")
    return v


def add_score_arguments(p: argparse.ArgumentParser) -> None:
    from .formats import SCALE_FLAGS

    p.set_defaults(model=[], feature=[])
    p.add_argument("--help", action="help", help="show this help and exit (-h is --height, as in libvmaf)")
    g = p.add_argument_group("libvmaf's options (vmaf --help)")
    g.add_argument("-r", "--reference", help="reference: .y4m, .yuv, '-' (y4m on stdin), a FIFO, or any "
                                             "video file FFmpeg reads (mp4, mkv, ivf, ...)")
    g.add_argument("-d", "--distorted", help="distorted: same kinds as --reference")
    g.add_argument("-w", "--width", type=_positive, help="width of raw .yuv input")
    g.add_argument("-h", "--height", type=_positive, help="height of raw .yuv input")
    g.add_argument("-p", "--pixel_format", "--pixel-format", dest="pixel_format", type=_pix_fmt,
                   help="pixel format of raw .yuv input: 420, 422 or 444")
    g.add_argument("-b", "--bitdepth", type=_bitdepth, help="bit depth of raw .yuv input (8, 10)")
    g.add_argument("-m", "--model", action=_AppendModel, metavar="PARAMS",
                   help="version=NAME or path=FILE, then :name=...:enable_transform=true:FEATURE.OPTION=VALUE "
                        "(default version=vmaf_v0.6.1); repeat for several")
    g.add_argument("-f", "--feature", action="append", metavar="NAME[=opt=val:...]",
                   help="an additional feature (psnr, float_ssim, float_ms_ssim, vif, adm, motion, ...)")
    g.add_argument("-o", "--output", metavar="PATH", help="write the per-frame log here ('-' = stdout, then "
                                                          "everything else goes to stderr)")
    fmt = g.add_mutually_exclusive_group()
    for name, what in (("xml", " (the default, as libvmaf)"), ("json", ""), ("csv", ""), ("sub", " (subtitles)")):
        fmt.add_argument(f"--{name}", dest="log_format", action="store_const", const=name,
                         help=f"write the log as {name.upper()}{what}")
    g.add_argument("-t", "--threads", type=_unsigned, metavar="N",
                   help="CPU lane worker threads of a private daemon (0: the daemon's default)")
    g.add_argument("-s", "--subsample", type=_unsigned, metavar="N",
                   help="log and pool only every Nth frame (temporal features still see every frame)")
    g.add_argument("-c", "--cpumask", type=_unsigned, metavar="MASK",
                   help="accepted for libvmaf compatibility and ignored (results do not depend on it)")
    g.add_argument("--gpumask", type=_unsigned, metavar="MASK",
                   help="GPU devices allowed, as a bit mask: the lowest set bit picks the device")
    g.add_argument("--aom_ctc", action=_Preset, metavar="VERSION", help="AOM CTC preset v1.0 .. v7.0")
    g.add_argument("--nflx_ctc", action=_Preset, metavar="VERSION", help="Netflix CTC preset v1.0")
    g.add_argument("--frame_cnt", "--frames", dest="frame_cnt", type=_unsigned, metavar="N",
                   help="score at most N frames")
    g.add_argument("--frame_skip_ref", type=_unsigned, default=0, metavar="N",
                   help="skip the first N frames of the reference")
    g.add_argument("--frame_skip_dist", type=_unsigned, default=0, metavar="N",
                   help="skip the first N frames of the distorted")
    g.add_argument("-n", "--no_prediction", action="store_true", help="no model: extract features only")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress meter; no score lines with -o")
    g.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    v = p.add_argument_group("vmafx's options")
    v.add_argument("--scale", choices=sorted(SCALE_FLAGS), metavar="FLAGS",
                   help="scale a distorted clip of another size to the reference's with FFmpeg's scaler "
                        f"({', '.join(sorted(SCALE_FLAGS))}; as ffmpeg's scale=flags=...)")
    v.add_argument("--summary", action="store_true",
                   help="print min, 1st and 5th percentile, mean, harmonic mean and max per model")
    v.add_argument("--lane", default="auto", choices=("auto", "cpu", "cuda", "hip"),
                   help="where to score (default auto: a GPU lane if the daemon has one, else cpu)")
    v.add_argument("--cpu-engine", choices=("auto", "compiled", "numpy"), default=None,
                   help="the CPU lane's scorer, in this process or a private daemon (default auto: the "
                        "kernels compiled for the host where they beat the numpy twins, when g++ is found)")
    where = v.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH",
                       help=f"score through the daemon at PATH (else $VMAFX_SOCKET, else {DEFAULT_SOCKET}, "
                            "else in this process)")
    where.add_argument("--private", action="store_true",
                       help="score through a private daemon started for this run")
    where.add_argument("--in-process", "--no-daemon", dest="in_process", action="store_true",
                       help="score in this process on the CPU lane, without any daemon")
    v.add_argument("--verbose", action="store_true", help="say which daemon (or none) scored")
    v.add_argument("--debug", action="store_true", help="show a traceback on failure")
