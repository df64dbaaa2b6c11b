"""The results file: one record a job, a torn last line dropped, --retry-failed, Parquet."""

from __future__ import annotations

import json

import pytest

from vmafx.batch.results import ResultsError, ResultsFile, read_records


def rec(jid, error=None, vmaf=80.0):
    return {"job_id": jid, "ok": error is None, "error": error, "options": {"frames": 3},
            "scores": {} if error else {"vmaf": {"min": 1.0, "max": 2.0, "mean": vmaf, "harmonic_mean": 1.5}}}


def test_records_are_written_once_and_a_torn_line_is_dropped_on_resume(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsFile(str(path)) as r:
        assert r.write(rec("a")) and r.write(rec("b", "boom"))
        assert not r.write(rec("a", vmaf=1.0))  # a second record for a job is refused
    with open(path, "ab") as f:
        f.write(b'{"job_id": "c", "ok": tr')  # the process died mid-line
    with pytest.raises(ResultsError, match="exists: add --resume"):
        ResultsFile(str(path))
    with ResultsFile(str(path), resume=True) as r:
        assert r.done == {"a", "b"}
        r.write(rec("c"))
    lines = path.read_text().splitlines()
    assert [json.loads(x)["job_id"] for x in lines] == ["a", "b", "c"]
    assert json.loads(lines[0])["scores"]["vmaf"]["mean"] == 80.0


def test_retry_failed_drops_the_failed_records(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultsFile(str(path)) as r:
        for x in (rec("a"), rec("b", "boom"), rec("c")):
            r.write(x)
    with ResultsFile(str(path), resume=True, retry_failed=True) as r:
        assert r.done == {"a", "c"}
        r.write(rec("b"))
    assert [x["job_id"] for x in read_records(str(path))] == ["a", "c", "b"]
    assert all(x["ok"] for x in read_records(str(path)))


def test_overwrite_starts_afresh_and_garbage_is_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"job_id": "a"}\nnot json\n')
    with pytest.raises(ResultsError, match=r"r.jsonl: line 2: not JSON"):
        ResultsFile(str(path), resume=True)
    with ResultsFile(str(path), overwrite=True) as r:
        assert r.done == set()
    assert not path.exists()  # created by the first record only


def test_parquet_keeps_earlier_rows_and_reads_back_like_jsonl(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "r.parquet"
    with ResultsFile(str(path)) as r:
        r.write(rec("a"))
        r.write(rec("b", "boom"))
        assert (tmp_path / "r.parquet.partial.jsonl").exists()
    assert not (tmp_path / "r.parquet.partial.jsonl").exists()
    with ResultsFile(str(path), resume=True) as r:
        assert r.done == {"a", "b"}
        r.write(rec("c", vmaf=70.0))
    got = read_records(str(path))
    assert [x["job_id"] for x in got] == ["a", "b", "c"]
    assert got[2]["scores"]["vmaf"]["mean"] == 70.0 and got[0]["options"] == {"frames": 3}
    table = pq.read_table(path)
    assert table.column("mean.vmaf").to_pylist() == [80.0, None, 70.0]
    assert table.column("error").to_pylist() == [None, "boom", None]
