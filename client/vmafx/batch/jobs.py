"""The job list of ``vmafxctl batch``: CSV or JSON Lines, one (reference, distorted, models) job a row.

JSON Lines (``.jsonl``, ``.ndjson``, or any file whose first non-blank character is ``{``)::

    {"id": "ep1-720p", "reference": "src/ep1.y4m", "distorted": "enc/ep1_720p.y4m",
     "model": ["version=vmaf_v0.6.1", "version=vmaf_v0.6.1neg"], "feature": ["psnr"],
     "options": {"frames": 240}}

CSV (anything else), with a header row::

    id,reference,distorted,model,feature,frames
    ep1-720p,src/ep1.y4m,enc/ep1_720p.y4m,version=vmaf_v0.6.1;version=vmaf_v0.6.1neg,psnr,240

Fields:

- ``reference``, ``distorted`` (required): paths, relative ones taken from the job
  list's own folder, or URLs (anything with ``://``) passed on as they are.
- ``model`` / ``models``: ``vmafxctl score --model`` specs; a list, or in CSV one cell
  with ``;`` between specs.  Absent or empty: the batch's ``--model`` flags, else
  vmafxctl's default (vmaf_v0.6.1).
- ``feature`` / ``features``: extra features (``--feature`` specs), the same way.
- ``id`` (optional): the job's id in the results.  Absent: derived from the job's
  content (:func:`job_id`), so the same row gets the same id in every run -- what
  ``--resume`` matches on.
- ``options``: further ``vmafxctl score`` options as ``{"name": value}`` (``true`` for a
  flag without a value); in CSV every other column is an option (empty cells ignored).
  Each becomes ``--name value`` on the score command line, so whatever the installed
  ``vmafxctl score`` accepts (``scale``, ``frames``, ``width``/``height``/``pixel-format``
  for raw ``.yuv``) can be given per job.

Bad rows raise :class:`JobListError` naming the line and the field.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..field_error import FieldError

__all__ = ["Job", "JobListError", "load_jobs", "parse_jobs", "job_id"]

_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=@,")
_RESERVED = {"id", "reference", "distorted", "model", "models", "feature", "features", "options"}


class JobListError(FieldError):
    """A job list row is malformed; ``field`` is ``FILE:LINE: field``."""


@dataclass(frozen=True)
class Job:
    id: str
    reference: str
    distorted: str
    models: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    #: ``vmafxctl score`` options, name -> value (True: a flag without a value)
    options: Mapping[str, Any] = field(default_factory=dict)
    #: where the row came from, for messages
    line: int = 0

    def to_dict(self) -> dict:
        return {"id": self.id, "reference": self.reference, "distorted": self.distorted,
                "models": list(self.models), "features": list(self.features), "options": dict(self.options)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Job":
        return cls(d["id"], d["reference"], d["distorted"], tuple(d.get("models", ())),
                   tuple(d.get("features", ())), dict(d.get("options", {})))

    def score_args(self) -> list[str]:
        """The job as ``vmafxctl score`` arguments (without output and daemon flags)."""
        args = ["--reference", self.reference, "--distorted", self.distorted]
        for m in self.models:
            args += ["--model", m]
        for f in self.features:
            args += ["--feature", f]
        for name, value in self.options.items():
            if value is True:
                args.append(f"--{name}")
            elif value is not False and value is not None:
                args += [f"--{name}", str(value)]
        return args


def job_id(reference: str, distorted: str, models: Iterable[str], features: Iterable[str],
           options: Mapping[str, Any]) -> str:
    """A stable id from what the job computes: 16 hex digits of a SHA-256 over its canonical JSON.

    Paths are hashed as resolved, so the same list run from another folder keeps its ids.
    """
    canon = json.dumps({"r": reference, "d": distorted, "m": list(models), "f": list(features),
                        "o": {k: options[k] for k in sorted(options)}}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def _resolve(path: str, base: str) -> str:
    if "://" in path or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base, path))


def _spec_list(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = [s.strip() for s in value.split(";")]
    elif isinstance(value, list) and all(isinstance(s, str) for s in value):
        items = [s.strip() for s in value]
    else:
        raise JobListError(f"{where}: {name}", f"expected a string or a list of strings, got {value!r}")
    return tuple(s for s in items if s)


def _option_value(value: Any, where: str, name: str) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, str)):
        return value
    raise JobListError(f"{where}: options.{name}", f"expected a string, number or true, got {value!r}")


def _make_job(row: Mapping[str, Any], options: Mapping[str, Any], where: str, base: str, line: int,
              default_models: tuple[str, ...], default_features: tuple[str, ...]) -> Job:
    def text(name: str, required: bool) -> str | None:
        v = row.get(name)
        if v is None or v == "":
            if required:
                raise JobListError(f"{where}: {name}", "is required")
            return None
        if not isinstance(v, str):
            raise JobListError(f"{where}: {name}", f"expected a string, got {v!r}")
        return v.strip()

    ref = _resolve(text("reference", True), base)  # type: ignore[arg-type]
    dist = _resolve(text("distorted", True), base)  # type: ignore[arg-type]
    if "model" in row and "models" in row:
        raise JobListError(f"{where}: models", "give either model or models, not both")
    if "feature" in row and "features" in row:
        raise JobListError(f"{where}: features", "give either feature or features, not both")
    models = _spec_list(row.get("model", row.get("models")), where, "model") or default_models
    features = _spec_list(row.get("feature", row.get("features")), where, "feature") or default_features
    opts = {}
    for k, v in options.items():
        name = k.lstrip("-")
        if not name or not all(c.isalnum() or c in "_-" for c in name):
            raise JobListError(f"{where}: options", f"{k!r} is not an option name")
        v = _option_value(v, where, name)
        if v is not None and v != "":
            opts[name] = v
    jid = text("id", False)
    if jid is not None and not set(jid) <= _ID_CHARS:
        raise JobListError(f"{where}: id", f"{jid!r} has characters other than letters, digits and ._-+=@,")
    if jid is None:
        jid = job_id(ref, dist, models, features, opts)
    return Job(jid, ref, dist, models, features, opts, line)


def _looks_like_jsonl(name: str, text: str) -> bool:
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return True
    if name.endswith(".csv"):
        return False
    return text.lstrip().startswith("{")


def parse_jobs(text: str, *, name: str = "<jobs>", base: str = ".", models: Iterable[str] = (),
               features: Iterable[str] = ()) -> list[Job]:
    """Parse a job list's text.  Duplicate ids are an error unless the rows are the same job."""
    dm, df = tuple(models), tuple(features)
    jobs: list[Job] = []
    if _looks_like_jsonl(name, text):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = f"{name}:{n}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise JobListError(where, f"not JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(row, dict):
                raise JobListError(where, "expected a JSON object")
            unknown = sorted(set(row) - _RESERVED)
            if unknown:
                raise JobListError(f"{where}: {unknown[0]}", "unknown field (options go under \"options\")")
            options = row.get("options") or {}
            if not isinstance(options, dict):
                raise JobListError(f"{where}: options", "expected an object of option name -> value")
            jobs.append(_make_job(row, options, where, base, n, dm, df))
    else:
        reader = csv.reader(io.StringIO(text))
        header = None
        for row in reader:
            n = reader.line_num
            if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
                continue
            if header is None:
                header = [h.strip() for h in row]
                if "reference" not in header or "distorted" not in header:
                    raise JobListError(f"{name}:{n}", "the CSV header must name the reference and distorted columns")
                if "options" in header:
                    raise JobListError(f"{name}:{n}: options", "in CSV each option is its own column")
                continue
            where = f"{name}:{n}"
            if len(row) > len(header):
                raise JobListError(where, f"{len(row)} cells, the header has {len(header)}")
            cells = dict(zip(header, (c.strip() for c in row)))
            options = {k: v for k, v in cells.items() if k not in _RESERVED}
            jobs.append(_make_job(cells, options, where, base, n, dm, df))
    seen: dict[str, Job] = {}
    out = []
    for j in jobs:
        prev = seen.get(j.id)
        if prev is None:
            seen[j.id] = j
            out.append(j)
        elif prev.to_dict() != j.to_dict():
            raise JobListError(f"{name}:{j.line}: id", f"{j.id!r} is already the id of line {prev.line}, another job")
        # the same job twice: scored once
    return out


def load_jobs(path: str, *, models: Iterable[str] = (), features: Iterable[str] = ()) -> list[Job]:
    """Read and parse a job list file (``-`` reads stdin; relative paths then from the current folder)."""
    if path == "-":
        import sys

        return parse_jobs(sys.stdin.read(), name="<stdin>", base=os.getcwd(), models=models, features=features)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_jobs(text, name=path, base=os.path.dirname(os.path.abspath(path)), models=models, features=features)
