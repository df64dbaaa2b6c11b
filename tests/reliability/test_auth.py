"""Authorization: model files read beneath model_dirs (no symlink escapes), sessions seen per uid, logs rate-limited."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

import pytest

from vmafx.protocol import Error, ErrorCode, SessionOpened, UnregisterBuffer
from vmafxd.admission import RateLimitedLog
from vmafxd.model_files import read_model_file

from ..daemon.conftest import ROOT, Daemon
from ..daemon.rawclient import RawClient
from .test_admission import NOBODY, _peer, _shared_daemon, needs_root

MODEL = ROOT / "vmafxd" / "model" / "builtin" / "vmaf_v0.6.1.json"


@pytest.fixture
def dirs(tmp_path):
    models, outside = tmp_path / "models", tmp_path / "outside"
    (models / "sub").mkdir(parents=True)
    outside.mkdir()
    shutil.copy(MODEL, models / "sub" / "model.json")
    (outside / "model.json").write_text('{"secret": true}')
    return models, outside


def _refused(path, models, field="models[0].path"):
    with pytest.raises(Exception) as ei:
        read_model_file(str(path), [str(models)], field)
    assert (ei.value.code, ei.value.field) == (ErrorCode.E_NOTSUP, field), ei.value
    return ei.value


def test_a_model_file_is_read_beneath_model_dirs_only(dirs):
    models, outside = dirs
    assert read_model_file(str(models / "sub" / "model.json"), [str(models)], "f") == MODEL.read_text()
    (models / "evil.json").symlink_to(outside / "model.json")
    (models / "link").symlink_to(outside)
    (models / "inner.json").symlink_to(models / "sub" / "model.json")
    for path in (models / "evil.json", models / "link" / "model.json", models / "inner.json",
                 f"{models}/sub/../sub/model.json", "sub/model.json", outside / "model.json", "/etc/passwd"):
        _refused(path, models)
    with pytest.raises(Exception) as ei:
        read_model_file(str(models / "missing.json"), [str(models)], "f")
    assert ei.value.code is ErrorCode.E_INVAL and "No such file" in ei.value.message


def test_swapping_a_directory_for_a_symlink_never_escapes(dirs):
    """The race a check-then-open loses: flip models/sub between a directory and a symlink outside."""
    models, outside = dirs
    inside_text = MODEL.read_text()
    stop = threading.Event()

    def flip() -> None:
        real, aside = models / "sub", models / "sub.real"
        while not stop.is_set():
            os.rename(real, aside)
            real.symlink_to(outside)
            real.unlink()
            os.rename(aside, real)

    t = threading.Thread(target=flip)
    t.start()
    read = refused = 0
    try:
        for _ in range(3000):
            try:
                text = read_model_file(str(models / "sub" / "model.json"), [str(models)], "f")
            except Exception as e:
                assert getattr(e, "code", None) in (ErrorCode.E_NOTSUP, ErrorCode.E_INVAL), e
                refused += 1
            else:
                assert text == inside_text  # never the outside file
                read += 1
    finally:
        stop.set()
        t.join()
    assert read > 0 and refused > 0  # both sides of the race were seen


def test_the_daemon_opens_path_models_safely(dirs, tmp_path):
    models, outside = dirs
    (models / "evil.json").symlink_to(outside / "model.json")
    cfg = tmp_path / "vmafxd.toml"
    cfg.write_text(f'model_dirs = ["{models}"]\n')
    d = Daemon("--config", str(cfg))
    try:
        c = RawClient(d.socket)
        c.hello()
        ok = c.open_session(width=64, height=64, models=[f"path={models}/sub/model.json"])
        assert isinstance(ok, SessionOpened), ok
        err = c.open_session(width=64, height=64, models=[f"path={models}/evil.json"])
        assert isinstance(err, Error) and (err.code, err.field) == ("E_NOTSUP", "models[0].path"), err
        c.close_session(ok.session)
        c.close()
    finally:
        d.close()


@needs_root
def test_a_client_sees_only_its_own_users_sessions(tmp_path):
    d = _shared_daemon(tmp_path, 'socket_mode = "0666"\nallow_users = ["root", "65534"]\n')
    try:
        c = RawClient(d.socket)
        c.hello()
        mine = c.open_ok(width=64, height=64, features=["psnr"]).session
        other = _peer(d.socket, NOBODY, "list")
        assert other["outcome"] == "scored", other
        assert other["listed"] == [NOBODY]  # its own session, not root's
        assert (other["status"]["scope"], other["status"]["sessions"], other["status"]["clients"]) == (
            f"uid {NOBODY}", 1, 1)
        # Root (the daemon's own user) sees everyone's.
        from vmafx.protocol import ListSessions
        rows = c.request(ListSessions(seq=c.conn.next_seq())).sessions
        assert [(r["session"], r["uid"]) for r in rows] == [(mine, 0)]
        c.close_session(mine)
        c.close()
    finally:
        d.close()


def test_log_lines_are_rate_limited_per_client_with_a_count():
    now = [0.0]
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("vmafxd.test.ratelimit")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Keep())
    rl = RateLimitedLog(logger, "#7", burst=3, window_s=10.0, clock=lambda: now[0])
    assert [rl.log(logging.INFO, "line %d", i) for i in range(10)] == [True] * 3 + [False] * 7
    now[0] = 11.0
    assert rl.log(logging.INFO, "after")
    assert records == ["line 0", "line 1", "line 2", "client #7: 7 similar log lines suppressed in 11 s", "after"]
    assert rl.suppressed_total == 7
    # Lines below the logger's level are neither written nor counted (no "suppressed" line for them)
    logger.setLevel(logging.WARNING)
    records.clear()
    assert [rl.log(logging.INFO, "quiet %d", i) for i in range(20)] == [False] * 20
    now[0] = 30.0
    assert rl.log(logging.WARNING, "loud") and records == ["loud"] and rl.suppressed_total == 7


def test_a_client_repeating_errors_cannot_fill_the_log():
    d = Daemon()
    try:
        c = RawClient(d.socket)
        c.hello()
        for i in range(300):
            c.send(UnregisterBuffer(seq=c.conn.next_seq(), buffer=1000 + i))
        replies = [c.expect_error() for _ in range(300)]
        assert {r.code for r in replies} == {"E_NOENT"}
        c.close()
        d.wait_fds()
        log = d.log()
        assert log.count("unregister_buffer refused") <= 10
        assert "290 similar log lines suppressed" in log
    finally:
        d.close()


def test_the_units_exposure_is_at_most_one(tmp_path):
    import re
    import subprocess

    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze")
    unit = tmp_path / "vmafxd.service"
    shutil.copy(ROOT / "systemd" / "vmafxd.service", unit)
    out = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(unit)],
                         capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for vmafxd\.service: ([0-9.]+)", out.stdout)
    if m is None:
        pytest.skip(f"systemd-analyze security --offline is not supported here: {out.stderr.strip()[:200]}")
    assert float(m.group(1)) <= 1.0, out.stdout[-3000:]


def test_authorization_keys_in_the_config(tmp_path):
    from vmafxd.config import ConfigError, load_config

    cfg = tmp_path / "c.toml"
    cfg.write_text('allow_users = ["alice", 1001]\nallow_groups = []\nadmin_groups = ["wheel"]\n'
                   '[limits]\nmax_clients_per_uid = 4\nmax_frame_bytes = 1048576\n')
    c = load_config(str(cfg), {})
    assert (c.allow_users, c.allow_groups, c.admin_groups) == (("alice", "1001"), (), ("wheel",))
    assert (c.limits.max_clients_per_uid, c.limits.max_frame_bytes) == (4, 1048576)
    cfg.write_text('allow_groups = "vmafx"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(str(cfg), {})
    assert ei.value.field == "allow_groups"
