"""score_files: the daemon reads and scores two files a client opened (their fds, never a path).

Against a real daemon process: on the emulated GPU lane (the in-process GPU path, as on
CUDA) and on the CPU lane, every frame and pooled value equal to scoring the same files
in this process on the CPU lane; raw files with their geometry; ``max_frames``; the
shorter file ending it; bad files refused naming the field; every fd the daemon took
closed again; and ``vmafxctl score`` through a running daemon taking this path.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vmafx import in_process
from vmafx.client import Client
from vmafx.exceptions import VmafxError
from vmafx.io.inputs import open_input

from ..reference import uncompressed_chelsea

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAME = 347_603  # a 641x361 4:2:0 frame's bytes
HEAD_LINE = 6  # "FRAME\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The 641x361 pair (odd sizes, 6 frames) as y4m and raw, and a copy of the distorted cut to 4 frames."""
    d = tmp_path_factory.mktemp("score_files")
    out = uncompressed_chelsea(d)
    data = open(out["dist"], "rb").read()
    head = len(open(out["dist"], "rb").readline())
    (d / "short.y4m").write_bytes(data[:head + 4 * (HEAD_LINE + FRAME)])
    out["short"] = str(d / "short.y4m")
    return out


def _cpu(ref, dist, frames=None, geo=None):
    geo = geo or {}
    with open_input(ref, **geo) as r, open_input(dist, **geo) as d:
        report, n = in_process.score_in_process(r, d, ["version=vmaf_v0.6.1"], ["psnr"], lane="cpu",
                                                max_frames=frames)
    return report, n


async def _score(socket, ref, dist, **kw):
    fds = [os.open(ref, os.O_RDONLY), os.open(dist, os.O_RDONLY)]
    try:
        async with await Client.connect(socket) as client:
            return await client.score_files(fds[0], fds[1], models=["version=vmaf_v0.6.1"], features=["psnr"], **kw)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture(scope="module", params=["emu", "cpu", "cuda"])
def lane_daemon(request):
    from .conftest import Daemon

    if request.param == "cuda":
        from vmafxd.lanes.runtime import RuntimeUnavailable

        try:
            from vmafxd.lanes import cuda

            if cuda.load().device_count() < 1:
                pytest.skip("no CUDA device")
        except (ImportError, RuntimeUnavailable) as e:
            pytest.skip(f"no CUDA here ({e})")
    d = Daemon("--lane", request.param)
    try:
        yield d
    finally:
        d.close()


async def test_files_scored_by_the_daemon_equal_the_cpu_lane(lane_daemon, files):
    want, n = _cpu(files["ref"], files["dist"])
    reply, frames = await _score(lane_daemon.socket, files["ref"], files["dist"])
    assert reply.frames == n == 6 and reply.lane in ("emu", "cpu", "cuda")
    assert list(enumerate(frames)) == want.frames and reply.pooled == want.pooled
    assert reply.reference_ended and reply.distorted_ended
    assert (reply.width, reply.height, reply.models) == (641, 361, ("vmaf",))
    assert lane_daemon.wait_fds(lane_daemon.baseline) == lane_daemon.baseline  # both files' fds closed
    async with await Client.connect(lane_daemon.socket) as client:
        status = await client.status()
    assert status["file_jobs_running"] == status["file_jobs_waiting"] == 0 and status["file_frames_scored"] >= 6


async def test_raw_files_with_their_geometry(lane_daemon, files):
    geo = dict(width=641, height=361, pixel_format="420", bitdepth=8)
    want, _ = _cpu(files["ref_raw"], files["dist_raw"], geo=geo)
    reply, frames = await _score(lane_daemon.socket, files["ref_raw"], files["dist_raw"], **geo)
    assert list(enumerate(frames)) == want.frames and reply.pooled == want.pooled


async def test_max_frames_and_the_shorter_file(lane_daemon, files):
    want, _ = _cpu(files["ref"], files["dist"], frames=3)
    reply, frames = await _score(lane_daemon.socket, files["ref"], files["dist"], max_frames=3)
    assert reply.frames == 3 and list(enumerate(frames)) == want.frames
    assert not reply.reference_ended and not reply.distorted_ended
    reply, frames = await _score(lane_daemon.socket, files["ref"], files["short"])
    assert reply.frames == len(frames) == 4 and not reply.reference_ended and reply.distorted_ended


@pytest.mark.parametrize("case", ["pipe", "directory", "raw-without-geometry", "sizes-differ"])
async def test_bad_files_are_refused_naming_the_field(lane_daemon, files, tmp_path, case):
    (tmp_path / "small.y4m").write_bytes(b"YUV4MPEG2 W64 H64 F25:1 C420jpeg\nFRAME\n" + bytes(64 * 64 * 3 // 2))
    ref, dist, field = files["ref"], files["dist"], "reference"
    fds: list[int] = []
    try:
        if case == "pipe":
            r, w = os.pipe()
            os.write(w, open(ref, "rb").read(4096))
            fds = [r, w, os.open(dist, os.O_RDONLY)]
            a, b = r, fds[2]
        elif case == "directory":
            fds = [os.open(ref, os.O_RDONLY), os.open(str(tmp_path), os.O_RDONLY)]
            a, b, field = fds[0], fds[1], "distorted"
        elif case == "raw-without-geometry":
            fds = [os.open(files["ref_raw"], os.O_RDONLY), os.open(files["dist_raw"], os.O_RDONLY)]
            a, b = fds
        else:
            fds = [os.open(ref, os.O_RDONLY), os.open(str(tmp_path / "small.y4m"), os.O_RDONLY)]
            a, b, field = fds[0], fds[1], "distorted.width"
        async with await Client.connect(lane_daemon.socket) as client:
            with pytest.raises(VmafxError) as e:
                await client.score_files(a, b)
            assert e.value.field == field and e.value.code.value == "E_INVAL"
            # the connection goes on: a good pair right after
            reply, _ = await client.score_files(*(fds_ok := [os.open(ref, os.O_RDONLY), os.open(dist, os.O_RDONLY)]))
            for fd in fds_ok:
                os.close(fd)
            assert reply.frames == 6
    finally:
        for fd in fds:
            os.close(fd)
    assert lane_daemon.wait_fds(lane_daemon.baseline) == lane_daemon.baseline


def test_the_protocol_refuses_what_the_hello_did_not_ask_for(files):
    from vmafx.protocol import ClientConnection, LocalProtocolError, RemoteProtocolError, ServerConnection, Limits
    from vmafx.protocol import messages as m

    client = ClientConnection("t")
    client.send(m.Hello(seq=1, version=1, client="t"))
    with pytest.raises(LocalProtocolError):  # not in a state to send yet, and never without the daemon's yes
        client.send(m.ScoreFiles(seq=2, reference=0, distorted=1, fds=(5, 6)))
    server = ServerConnection(Limits(), "s")
    from vmafx.protocol import codec

    server.receive(codec.encode(m.Hello(seq=1, version=server_version(), client="t"))[0])
    data, fds = codec.encode(m.ScoreFiles(seq=2, reference=0, distorted=1, fds=(5, 6)))
    with pytest.raises(RemoteProtocolError) as e:
        server.receive(data, fds)
    assert e.value.field == "t" and "hello did not ask" in e.value.message


def server_version() -> int:
    from vmafx.protocol import PROTOCOL_VERSION

    return PROTOCOL_VERSION


@pytest.mark.parametrize("bad, field", [
    (dict(reference=0, distorted=0, fds=(5,)), "distorted"),
    (dict(reference=0, distorted=1, width=64, fds=(5, 6)), "height"),
    (dict(reference=0, distorted=2, fds=(5, 6)), "distorted"),
])
def test_score_files_fields_are_checked(bad, field):
    from vmafx.protocol import codec
    from vmafx.protocol import messages as m

    with pytest.raises(Exception) as e:
        msg = m.ScoreFiles(seq=1, **bad)
        codec.decode(*codec.encode(msg))
    assert getattr(e.value, "field", None) == field


def test_vmafxctl_through_a_running_daemon_reads_no_frame_itself(lane_daemon, files, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT, os.path.join(ROOT, "client")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    out = tmp_path / "log.json"
    p = subprocess.run([sys.executable, "-c", "import sys; from vmafx.cli import main; sys.exit(main())", "score",
                        "--socket", lane_daemon.socket, "-r", files["ref"], "-d", files["short"], "--feature", "psnr",
                        "--json", "-o", str(out), "-q", "--verbose"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "the files read by the daemon" in p.stderr
    # libvmaf's notice for the shorter file, as when this process reads the frames
    assert f'"{files["short"]}" ended before "{files["ref"]}".' in p.stderr
    import json

    got = json.loads(out.read_text())
    want, _ = _cpu(files["ref"], files["short"])
    assert len(got["frames"]) == 4
    assert [f["metrics"]["vmaf"] for f in got["frames"]] == pytest.approx(
        [metrics["vmaf"] for _i, metrics in want.frames], abs=5e-7)


async def test_a_client_gone_mid_job_stops_it_and_the_daemon_goes_on(files, tmp_path):
    """The job runs on a worker thread; when its client goes, it stops at its next frame (the
    CPU lane: a frame a step), closes both files, and the next client's job runs."""
    import trio

    from .conftest import Daemon

    head = open(files["ref"], "rb").readline()
    for key in ("ref", "dist"):  # 600 frames: far longer than the half second the client stays
        body = open(files[key], "rb").read()[len(head):]
        (tmp_path / f"{key}.y4m").write_bytes(head + body * 100)
    d = Daemon("--lane", "cpu")
    try:
        fds = [os.open(tmp_path / "ref.y4m", os.O_RDONLY), os.open(tmp_path / "dist.y4m", os.O_RDONLY)]
        try:
            with trio.move_on_after(0.5) as scope:
                async with await Client.connect(d.socket) as client:
                    await client.score_files(fds[0], fds[1])
            assert scope.cancelled_caught
        finally:
            for fd in fds:
                os.close(fd)
        reply, frames = await _score(d.socket, files["ref"], files["dist"])
        assert reply.frames == len(frames) == 6
        assert d.wait_fds(d.baseline) == d.baseline
        assert d.proc.poll() is None and "Traceback" not in d.log()
    finally:
        d.close()


async def test_the_device_asked_for_is_one_of_the_daemons(files):
    """On a daemon with two (emulated) GPUs a job runs on the one asked for; one it does not
    have is refused naming ``device``, as open_session refuses it."""
    from .conftest import Daemon

    d = Daemon("--lane", "emu", env={"VMAFXD_EMU_DEVICES": "2"})
    try:
        want, _ = _cpu(files["ref"], files["dist"])
        reply, frames = await _score(d.socket, files["ref"], files["dist"], device=1)
        assert list(enumerate(frames)) == want.frames
        with pytest.raises(VmafxError) as e:
            await _score(d.socket, files["ref"], files["dist"], device=2)
        assert e.value.field == "device" and "has devices 0, 1, not 2" in e.value.message
        assert d.wait_fds(d.baseline) == d.baseline
    finally:
        d.close()


async def test_jobs_run_side_by_side_one_a_device(files):
    """As many jobs at once as the lane has devices: two clients' jobs on a two-GPU daemon
    both answer right, and the status counts them."""
    import trio

    from .conftest import Daemon

    d = Daemon("--lane", "emu", env={"VMAFXD_EMU_DEVICES": "2"})
    try:
        want, _ = _cpu(files["ref"], files["dist"])
        got = []

        async def one():
            got.append(await _score(d.socket, files["ref"], files["dist"]))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(one)
        assert len(got) == 3 and all(list(enumerate(frames)) == want.frames for _reply, frames in got)
        async with await Client.connect(d.socket) as client:
            status = await client.status()
        assert status["file_frames_scored"] == 18 and status["file_jobs_running"] == 0
    finally:
        d.close()


async def test_a_client_has_at_most_four_jobs_unanswered(files, tmp_path):
    """A fifth score_files while four wait is refused (E_NOMEM naming score_files), its fds
    closed with the packet; the four are answered."""
    import trio

    from vmafxd.admission import MAX_FILE_JOBS_PER_CLIENT

    from .conftest import Daemon

    head = open(files["ref"], "rb").readline()
    for key in ("ref", "dist"):  # long enough for the first four to be unanswered when the fifth comes
        body = open(files[key], "rb").read()[len(head):]
        (tmp_path / f"{key}.y4m").write_bytes(head + body * 10)
    d = Daemon("--lane", "cpu", workers=1)
    try:
        async with await Client.connect(d.socket) as client:
            outcomes: list = []

            async def one():
                fds = [os.open(tmp_path / "ref.y4m", os.O_RDONLY), os.open(tmp_path / "dist.y4m", os.O_RDONLY)]
                try:
                    outcomes.append((await client.score_files(fds[0], fds[1], max_frames=60))[0].frames)
                except VmafxError as e:
                    outcomes.append(e)
                finally:
                    for fd in fds:
                        os.close(fd)

            async with trio.open_nursery() as nursery:
                for _ in range(MAX_FILE_JOBS_PER_CLIENT + 1):  # sent at once: none is answered yet
                    nursery.start_soon(one)
        refused = [o for o in outcomes if isinstance(o, VmafxError)]
        assert len(refused) == 1 and refused[0].code.value == "E_NOMEM" and refused[0].field == "score_files"
        assert sorted(o for o in outcomes if not isinstance(o, VmafxError)) == [60] * MAX_FILE_JOBS_PER_CLIENT
        assert d.wait_fds(d.baseline) == d.baseline
    finally:
        d.close()


async def test_a_gpu_keeps_its_kit_between_jobs_and_frees_it_unused(files):
    """The second job on a device takes the kit the first left (kernels loaded, slots pinned):
    one kit made for two jobs, both answered right; with ``--files-keep`` short the kit is freed
    once unused that long."""
    import trio

    from .conftest import Daemon

    d = Daemon("--lane", "emu", "--files-keep", "1.5")
    try:
        want, _ = _cpu(files["ref"], files["dist"])
        for _ in range(2):
            reply, frames = await _score(d.socket, files["ref"], files["dist"])
            assert list(enumerate(frames)) == want.frames
        async with await Client.connect(d.socket) as client:
            status = await client.status()
            assert status["file_kits_made"] == 1 and status["file_kits_kept"] == 1
            with trio.fail_after(10):
                while status["file_kits_kept"]:
                    await trio.sleep(0.1)
                    status = await client.status()
        reply, frames = await _score(d.socket, files["ref"], files["dist"])
        assert list(enumerate(frames)) == want.frames
        async with await Client.connect(d.socket) as client:
            assert (await client.status())["file_kits_made"] == 2
    finally:
        d.close()


async def test_files_keep_0_frees_the_kit_after_every_job(files):
    from .conftest import Daemon

    d = Daemon("--lane", "emu", "--files-keep", "0")
    try:
        for _ in range(2):
            await _score(d.socket, files["ref"], files["dist"])
        async with await Client.connect(d.socket) as client:
            status = await client.status()
        assert status["file_kits_made"] == 2 and status["file_kits_kept"] == 0
    finally:
        d.close()


def _score_args(*argv):
    from vmafx.cli import build_parser

    return build_parser().parse_args(["score", *argv])


def test_vmafxctl_asks_the_daemon_before_it_opens_the_inputs(files, tmp_path):
    """Two y4m files and a daemon known: the command sends score_files first (the daemon scores
    while the command imports, loads models and opens the inputs) and takes that job's outcome
    as its report; anything that could change the request goes the usual way."""
    from vmafx import score_cmd

    from .conftest import Daemon

    d = Daemon("--lane", "emu")
    try:
        base = ["--socket", d.socket, "-r", files["ref"], "-d", files["short"], "--feature", "psnr"]
        job = score_cmd._start_early(_score_args(*base))
        assert job is not None and job.socket_path == d.socket
        want, _ = _cpu(files["ref"], files["short"])
        with open_input(files["ref"]) as rr, open_input(files["short"]) as dr:
            report = job.report(rr, dr)
            assert dr.read_frame() is None and rr.read_frame() is not None  # advanced past the 4 scored
        assert report.daemon_read and report.frames == want.frames and report.pooled == want.pooled
        assert report.ended_early == f'"{files["short"]}" ended before "{files["ref"]}".'
        raw = ["-w", "641", "-h", "361", "-p", "420", "-b", "8"]
        for extra in (["--scale", "bicubic"], ["--frame_skip_ref", "1"]):
            assert score_cmd._start_early(_score_args(*base, *extra)) is None, extra
        assert score_cmd._start_early(_score_args("--private", *base[2:])) is None
        assert score_cmd._start_early(_score_args("--socket", d.socket, "-r", files["ref_raw"],
                                                  "-d", files["dist_raw"], *raw)) is None
        assert score_cmd._start_early(_score_args("--socket", d.socket, "-r", "-", "-d", files["dist"])) is None
        assert d.wait_fds(d.baseline) == d.baseline
    finally:
        d.close()


def test_a_bad_model_still_fails_first_when_the_daemon_was_asked_early(files, tmp_path):
    """The job sent before the models are checked is dropped: the command says the model's error
    in one line, and the daemon goes on (its fds back to its baseline)."""
    from .conftest import Daemon

    d = Daemon("--lane", "cpu")
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [ROOT, os.path.join(ROOT, "client")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
        p = subprocess.run([sys.executable, "-c", "import sys; from vmafx.cli import main; sys.exit(main())", "score",
                            "--socket", d.socket, "-r", files["ref"], "-d", files["dist"], "-m", "version=nosuch",
                            "-q"], env=env, capture_output=True, text=True)
        assert p.returncode == 1 and len(p.stderr.splitlines()) == 1 and "nosuch" in p.stderr, p.stderr
        reply, frames = _score_now(d.socket, files["ref"], files["dist"])
        assert reply.frames == len(frames) == 6
        assert d.wait_fds(d.baseline) == d.baseline and "Traceback" not in d.log()
    finally:
        d.close()


def _score_now(socket, ref, dist):
    import trio

    return trio.run(lambda: _score(socket, ref, dist))
