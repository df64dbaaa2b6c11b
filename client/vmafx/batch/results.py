"""The results file of ``vmafxctl batch``: one record per job, streamed as jobs finish.

JSON Lines is the journal: each record is one line, written and flushed as
its job finishes, so an interrupted batch keeps everything done so far and
``--resume`` reads back which job ids already have a record.  A line cut short
by a crash is dropped (the file is truncated to its last whole line) before
anything is appended.

Parquet (``--format parquet`` or a ``.parquet`` name, with pyarrow installed)
cannot be appended to line by line, so the journal is kept beside it as
``NAME.parquet.partial.jsonl`` while the batch runs and folded into the
Parquet file at the end (the rows already there kept); a resumed run reads
both.  The record (see docs/operations.md, "Batch results"):

``job_id, reference, distorted, models, features, options, ok, error, scores,
frames, log, lane, node, attempt, started_at, elapsed_s``

``scores`` maps each pooled metric of the per-frame log (``vmaf``,
``vmaf_neg``, ``psnr_y``, ...) to its ``min/max/mean/harmonic_mean``, exactly as
the log's ``pooled_metrics`` has them.  In Parquet, ``scores`` is a JSON string and each
metric's mean is also a column ``mean.<metric>``; ``options`` is a JSON string.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Iterator

from ..transport import ClosedOnExit

__all__ = ["ResultsFile", "ResultsError", "read_records", "results_format"]


class ResultsError(ValueError):
    """The results file cannot be used as asked (exists without --resume, unreadable, no pyarrow)."""


def results_format(path: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    return "parquet" if path.endswith(".parquet") else "jsonl"


def _read_jsonl(path: str) -> tuple[list[dict], int]:
    """Records of a journal, and the byte length of its whole lines (a torn last line is left out)."""
    records = []
    good = 0
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # a torn last line: the process died while writing it
        line = data[pos:nl]
        lineno = data.count(b"\n", 0, nl) + 1
        pos = nl + 1
        if line.strip():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ResultsError(f"{path}: line {lineno}: not JSON ({e.msg})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("job_id"), str):
                raise ResultsError(f"{path}: line {lineno}: not a result record (no job_id)")
            records.append(rec)
        good = pos
    return records, good


def _parquet():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError:
        raise ResultsError("--format parquet needs pyarrow (pip install pyarrow)") from None
    return pq


def _from_parquet_row(row: dict) -> dict:
    rec = {k: v for k, v in row.items() if not k.startswith("mean.")}
    for k in ("scores", "options"):
        if isinstance(rec.get(k), str):
            rec[k] = json.loads(rec[k])
    return rec


def _to_parquet_row(rec: dict) -> dict:
    row = dict(rec)
    scores = rec.get("scores") or {}
    row["scores"] = json.dumps(scores, sort_keys=True)
    row["options"] = json.dumps(rec.get("options") or {}, sort_keys=True)
    for metric, stats in sorted(scores.items()):
        row[f"mean.{metric}"] = (stats or {}).get("mean")
    return row


def read_records(path: str, fmt: str | None = None) -> list[dict]:
    """Every record of a results file (and of its partial journal, for Parquet)."""
    fmt = results_format(path, fmt)
    out: list[dict] = []
    if fmt == "parquet":
        if os.path.exists(path):
            out += [_from_parquet_row(r) for r in _parquet().read_table(path).to_pylist()]
        journal = path + ".partial.jsonl"
        if os.path.exists(journal):
            out += _read_jsonl(journal)[0]
        return out
    if os.path.exists(path):
        out += _read_jsonl(path)[0]
    return out


class ResultsFile(ClosedOnExit):
    """Appends records to the journal; ``done`` holds the job ids that have a record."""

    def __init__(self, path: str, fmt: str | None = None, *, resume: bool = False, overwrite: bool = False,
                 retry_failed: bool = False):
        self.path = path
        self.format = results_format(path, fmt)
        if self.format not in ("jsonl", "parquet"):
            raise ResultsError(f"--format: {self.format!r} is not jsonl or parquet")
        if self.format == "parquet":
            _parquet()
        self.journal = path + ".partial.jsonl" if self.format == "parquet" else path
        exists = os.path.exists(path) or os.path.exists(self.journal)
        if exists and not (resume or overwrite):
            raise ResultsError(f"{path} exists: add --resume to continue it, or --overwrite to start again")
        self.previous: list[dict] = []  # Parquet rows kept from an earlier run
        self.records: dict[str, dict] = {}
        if overwrite and not resume:
            for p in {path, self.journal}:
                if os.path.exists(p):
                    os.unlink(p)
        elif exists:
            self._load(retry_failed)
        parent = os.path.dirname(os.path.abspath(self.journal))
        os.makedirs(parent, exist_ok=True)
        if not os.access(parent, os.W_OK):
            raise ResultsError(f"{path}: cannot write in {parent}")
        self._f = None  # opened by the first record: a batch that fails to start leaves no file
        self._closed = False

    def _load(self, retry_failed: bool) -> None:
        if self.format == "parquet" and os.path.exists(self.path):
            self.previous = [_from_parquet_row(r) for r in _parquet().read_table(self.path).to_pylist()]
        journal: list[dict] = []
        if os.path.exists(self.journal):
            journal, good = _read_jsonl(self.journal)
            if good != os.path.getsize(self.journal):
                os.truncate(self.journal, good)
        for rec in self.previous + journal:
            self.records[rec["job_id"]] = rec  # one per id; a later one (a retried failure) wins
        if retry_failed:
            failed = {k for k, r in self.records.items() if r.get("error")}
            if failed:
                for k in failed:
                    del self.records[k]
                self.previous = [r for r in self.previous if r["job_id"] not in failed]
                self._rewrite_journal([r for r in journal if r["job_id"] not in failed])

    def _rewrite_journal(self, records: Iterable[dict]) -> None:
        # Write beside, then rename: a crash leaves either the old journal or the new one.
        tmp = self.journal + ".tmp"
        with open(tmp, "wb") as f:
            for r in records:
                f.write(_line(r))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.journal)

    @property
    def done(self) -> set[str]:
        return set(self.records)

    def write(self, record: dict) -> bool:
        """Append one record; False (and nothing written) if its job already has one."""
        jid = record["job_id"]
        if jid in self.records:
            return False
        if self._f is None:
            self._f = open(self.journal, "ab")
        self._f.write(_line(record))
        self._f.flush()
        self.records[jid] = record
        return True

    def close(self) -> None:
        """Flush to disk; for Parquet, fold the journal into the Parquet file."""
        if self._closed:
            return
        self._closed = True
        if self._f is not None:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
        if self.format == "parquet" and os.path.exists(self.journal):
            import pyarrow as pa

            pq = _parquet()
            journal = _read_jsonl(self.journal)[0]
            rows = [_to_parquet_row(r) for r in self.previous + journal]
            # from_pylist takes its columns from the first row: give every row every column.
            names = list(dict.fromkeys(k for r in rows for k in r))
            rows = [{k: r.get(k) for k in names} for r in rows]
            tmp = self.path + ".tmp"
            pq.write_table(pa.Table.from_pylist(rows), tmp)
            os.replace(tmp, self.path)
            os.unlink(self.journal)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.records.values())


def _line(record: dict) -> bytes:
    return (json.dumps(record, sort_keys=False, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")
