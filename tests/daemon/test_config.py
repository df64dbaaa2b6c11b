"""Configuration: defaults < file < flags; typed errors name the key."""

import pytest

from vmafxd.config import Config, ConfigError, load_config


def _write(tmp_path, text):
    p = tmp_path / "vmafxd.toml"
    p.write_text(text)
    return str(p)


def test_file_then_flags(tmp_path):
    path = _write(tmp_path, 'socket = "/tmp/x.sock"\nlane = "cpu"\ncpu_workers = 3\nfence_timeout_ms = 250\n'
                            'socket_mode = "0600"\n[limits]\nmax_clients = 7\nmax_frames_in_flight = 9\n')
    cfg = load_config(path, {})
    assert (cfg.socket, cfg.lane, cfg.cpu_workers, cfg.socket_mode) == ("/tmp/x.sock", "cpu", 3, 0o600)
    assert (cfg.limits.fence_timeout_ms, cfg.limits.max_clients, cfg.limits.max_frames_in_flight) == (250, 7, 9)
    cfg = load_config(path, {"cpu_workers": 5, "socket": None, "limit": ["max_clients=2"], "fence_timeout_ms": 40})
    assert (cfg.socket, cfg.cpu_workers, cfg.limits.max_clients, cfg.limits.fence_timeout_ms) == (
        "/tmp/x.sock", 5, 2, 40)
    assert cfg.limits.max_frames_in_flight == 9  # the file's, untouched by flags


@pytest.mark.parametrize("text, field", [
    ("sockets = 'x'", "sockets"),
    ("[limits]\nmax_clientz = 3", "limits.max_clientz"),
    ("[limits]\nmax_clients = 'many'", "limits.max_clients"),
    ("lane = 'gpu'", "lane"),
    ("cpu_workers = 0", "cpu_workers"),
    ("socket_mode = 'rw'", "socket_mode"),
    ("socket = [", "--config"),
    ("[limits]\nmax_fds_per_message = 254", "limits.max_fds_per_message"),  # above SCM_MAX_FD
    ("[limits]\nmax_frames_per_submit = 1025", "limits.max_frames_per_submit"),
    ("lane_process = 'yes'", "lane_process"),
    ("cpu_keep_heap = 1", "cpu_keep_heap"),
    ("files_keep_s = -1", "files_keep_s"),
    ("files_keep_s = 'long'", "files_keep_s"),
    ("gpu_batch = 0", "gpu_batch"),
    ("gpu_batch = 'big'", "gpu_batch"),
    ("gpu_batch = 32.0", "gpu_batch"),
])
def test_errors_name_the_key(tmp_path, text, field):
    with pytest.raises(ConfigError) as e:
        load_config(_write(tmp_path, text), {})
    assert e.value.field == field


def test_limit_flag_errors():
    with pytest.raises(ConfigError) as e:
        load_config(None, {"limit": ["max_clients"]})
    assert e.value.field == "--limit"
    with pytest.raises(ConfigError) as e:
        load_config(None, {"limit": ["nonsense=3"]})
    assert e.value.field == "limits.nonsense"


def test_defaults():
    cfg = Config()
    assert cfg.socket == "/run/vmafx/vmafxd.sock" and cfg.lane == "auto" and 1 <= cfg.cpu_workers <= 8
    assert cfg.socket_mode == 0o660 and cfg.shutdown_timeout_s == 10.0
    assert cfg.cpu_keep_heap is True


def test_files_keep_from_the_file_and_the_flag(tmp_path):
    assert Config().files_keep_s == 60.0
    path = _write(tmp_path, "files_keep_s = 5\n")
    assert load_config(path, {}).files_keep_s == 5.0
    assert load_config(path, {"files_keep_s": 0.0}).files_keep_s == 0.0  # --files-keep 0


def test_gpu_batch_is_auto_unless_the_file_or_the_flag_says(tmp_path):
    from vmafxd.__main__ import build_parser

    assert Config().gpu_batch == "auto"
    assert load_config(_write(tmp_path, "gpu_batch = 64\n"), {}).gpu_batch == 64
    assert load_config(_write(tmp_path, 'gpu_batch = "AUTO"\n'), {}).gpu_batch == "auto"
    flags = build_parser().parse_args(["--gpu-batch", "48"])
    assert load_config(_write(tmp_path, 'gpu_batch = "auto"\n'), {"gpu_batch": flags.gpu_batch}).gpu_batch == 48
    assert build_parser().parse_args(["--gpu-batch", "auto"]).gpu_batch == "auto"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--gpu-batch", "many"])


def test_cpu_keep_heap_can_be_turned_off(tmp_path):
    assert load_config(_write(tmp_path, "cpu_keep_heap = false\n"), {}).cpu_keep_heap is False


def test_lane_process_is_off_unless_the_file_or_the_flag_says(tmp_path):
    assert load_config(_write(tmp_path, 'lane = "emu"\n'), {}).lane_process is False
    path = _write(tmp_path, 'lane = "emu"\nlane_process = true\n')
    assert load_config(path, {}).lane_process is True
    assert load_config(path, {"lane_process": False}).lane_process is False  # --no-lane-process
    assert load_config(_write(tmp_path, ""), {"lane_process": True}).lane_process is True


def test_gil_switch_interval_from_the_environment(monkeypatch, caplog):
    import sys

    from vmafxd.__main__ import gil_switch_interval

    before = sys.getswitchinterval()
    try:
        monkeypatch.setenv("VMAFXD_GIL_SWITCH_MS", "0.5")
        gil_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(0.0005)
        for bad in ("fast", "0", "-1", "5000"):
            monkeypatch.setenv("VMAFXD_GIL_SWITCH_MS", bad)
            caplog.clear()
            gil_switch_interval()
            assert sys.getswitchinterval() == pytest.approx(0.0005)
            assert "VMAFXD_GIL_SWITCH_MS" in caplog.text
    finally:
        sys.setswitchinterval(before)
