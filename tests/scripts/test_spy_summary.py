"""scripts/spy_summary.py on a fabricated py-spy raw file: the shares it prints are the file's."""

from __future__ import annotations

import io

from . import load_script

spy = load_script("spy_summary")

P = 'process 10:"python3 scripts/bench_gpu.py"'
D = 'process 11:"python3 -m vmafxd --socket /tmp/d.sock"'
W = 'process 12:"python3 -m vmafxd.lanes.process.child --lane cuda"'
RAW = "\n".join([
    f"{P};{D};thread (11): MainThread;run (trio/_core/_run.py:2400);EpollIOManager.get_events (trio/_io_epoll.py:243) 60",
    f"{P};{D};thread (11): MainThread;run (trio/_core/_run.py:2400);FrameLedger._send_ready (vmafxd/ledger.py:580) 40",
    f"{P};{D};thread (13): vmafxd-cuda0;DeviceWorker.run_forever (vmafxd/lanes/device.py:529) 30",
    f"{P};{D};thread (13): vmafxd-cuda0;DeviceWorker.run_forever (vmafxd/lanes/device.py:527);"
    "Event.synchronize (vmafxd/lanes/runtime.py:380);StatusDriver.event_synchronize (vmafxd/lanes/runtime.py:330);"
    "StatusDriver.call (vmafxd/lanes/runtime.py:312) 10",
    f"{P};{D};thread (13): vmafxd-cuda0;DeviceWorker.run_forever (vmafxd/lanes/device.py:527);"
    "GpuWorker.poll (vmafxd/lanes/gpu/worker.py:90);svm_rbf (vmafxd/lanes/native/host_math.py:58) 60",
    f"{P};{D};thread (11): MainThread;_find_and_load (<frozen importlib._bootstrap>:1176) 500",
    f"{P};{D};{W};thread (14): MainThread;Child.receive (vmafxd/lanes/process/child.py:193) 7",
    f"{P};thread (10): MainThread;Producer.run (bench_gpu.py:270) 9",
]) + "\n"


def test_threads_their_waiting_share_and_their_functions(tmp_path):
    raw = tmp_path / "spy.raw"
    raw.write_text(RAW)
    threads = spy.read(str(raw), "vmafxd --socket")
    # the daemon's two threads; the import stack and the worker process (a child) left out
    assert {k: sum(v.values()) for k, v in threads.items()} == {"thread (11): MainThread": 100,
                                                                 "thread (13): vmafxd-cuda0": 100}
    out = io.StringIO()
    spy.summarize(threads, "cuda0", 5, out)
    text = out.getvalue()
    assert "     100   50.0%    60.0%  thread (11): MainThread" in text
    # waiting: the queue (run_forever innermost) and the driver's synchronize under its wrapper
    assert "     100   50.0%    40.0%  thread (13): vmafxd-cuda0" in text
    assert "    70.0%  DeviceWorker.run_forever (device.py)" not in text  # inclusive: every sample
    assert "   100.0%  DeviceWorker.run_forever (device.py)" in text
    assert "    60.0%  GpuWorker.poll (worker.py)" in text
    assert "    60.0%  svm_rbf (host_math.py:58)" in text
    assert "_send_ready" not in text  # --thread: the device worker's detail only
    worker = spy.read(str(raw), "lanes.process.child")
    assert {k: sum(v.values()) for k, v in worker.items()} == {"thread (14): MainThread": 7}


def test_a_file_recorded_with_p_has_no_process_frames(tmp_path):
    raw = tmp_path / "spy.raw"
    raw.write_text("thread (11): MainThread;run (trio/_core/_run.py:2400);EpollIOManager.get_events (x.py:1) 3\n"
                   "thread (11): MainThread;FrameLedger._send_ready (vmafxd/ledger.py:580) 1\n")
    threads = spy.read(str(raw), "")
    assert {k: sum(v.values()) for k, v in threads.items()} == {"thread (11): MainThread": 4}
    assert spy.read(str(raw), "vmafxd --socket") == {}
