"""The job list: CSV and JSON Lines, ids, options, errors naming line and field."""

from __future__ import annotations

import pytest

from vmafx.batch.jobs import Job, JobListError, job_id, parse_jobs


def test_csv_and_jsonl_give_the_same_jobs_and_options_become_score_flags():
    csv_text = ("reference,distorted,model,feature,frames,scale\n"
                "r.y4m,d.y4m,version=vmaf_v0.6.1;version=vmaf_v0.6.1neg,psnr,10,\n"
                "/abs/r.y4m,https://host/d.mp4,,,,bicubic\n")
    jsonl = ('{"reference": "r.y4m", "distorted": "d.y4m", "model": ["version=vmaf_v0.6.1", '
             '"version=vmaf_v0.6.1neg"], "feature": "psnr", "options": {"frames": "10"}}\n'
             '# a comment\n\n'
             '{"reference": "/abs/r.y4m", "distorted": "https://host/d.mp4", "options": {"scale": "bicubic"}}\n')
    a = parse_jobs(csv_text, name="j.csv", base="/cat")
    b = parse_jobs(jsonl, name="j.jsonl", base="/cat")
    assert [j.to_dict() for j in a] == [j.to_dict() for j in b]
    assert a[0].reference == "/cat/r.y4m" and a[1].distorted == "https://host/d.mp4"
    assert a[0].models == ("version=vmaf_v0.6.1", "version=vmaf_v0.6.1neg") and a[0].features == ("psnr",)
    assert a[0].score_args() == ["--reference", "/cat/r.y4m", "--distorted", "/cat/d.y4m", "--model",
                                 "version=vmaf_v0.6.1", "--model", "version=vmaf_v0.6.1neg", "--feature", "psnr",
                                 "--frames", "10"]
    assert a[1].score_args()[-2:] == ["--scale", "bicubic"]


def test_ids_are_stable_and_depend_on_what_the_job_computes():
    one = parse_jobs('{"reference": "r.y4m", "distorted": "d.y4m"}\n', base="/x")[0]
    again = parse_jobs("reference,distorted\nr.y4m,d.y4m\n", base="/x")[0]
    assert one.id == again.id == job_id("/x/r.y4m", "/x/d.y4m", (), (), {})
    assert len(one.id) == 16
    other = [parse_jobs('{"reference": "r.y4m", "distorted": "d.y4m", ' + extra + "}\n", base="/x")[0].id
             for extra in ('"model": "version=vmaf_v0.6.1neg"', '"feature": "psnr"', '"options": {"frames": 3}')]
    assert len({one.id, *other}) == 4
    assert parse_jobs('{"reference": "r", "distorted": "d"}', base="/y")[0].id != one.id
    # batch-wide defaults fill in jobs without models, and are part of the id
    dflt = parse_jobs("reference,distorted\nr.y4m,d.y4m\n", base="/x", models=["version=vmaf_v0.6.1neg"])[0]
    assert dflt.models == ("version=vmaf_v0.6.1neg",) and dflt.id == other[0]
    assert Job.from_dict(one.to_dict()) == Job(one.id, one.reference, one.distorted)


def test_the_same_job_twice_is_scored_once_and_a_reused_id_is_refused():
    jobs = parse_jobs("reference,distorted\nr,d\nr,d\n", name="j.csv")
    assert len(jobs) == 1
    with pytest.raises(JobListError, match=r"^j.csv:3: id: 'a' is already the id of line 2"):
        parse_jobs("id,reference,distorted\na,r,d\na,r,e\n", name="j.csv")


@pytest.mark.parametrize("text, where", [
    ('{"reference": "r"}\n', r"j.jsonl:1: distorted: is required"),
    ('{"reference": "r", "distorted": "d"}\n{"reference": 3, "distorted": "d"}\n', r"j.jsonl:2: reference: expected a string"),
    ('{"reference": "r", "distorted": "d", "scale": "x"}\n', r"j.jsonl:1: scale: unknown field"),
    ('{"reference": "r", "distorted": "d", "options": {"frames": [1]}}\n', r"j.jsonl:1: options.frames: expected"),
    ('{"reference": "r", "distorted": "d", "model": 5}\n', r"j.jsonl:1: model: expected a string or a list"),
    ('{"reference": "r", "distorted": "d", "id": "a b"}\n', r"j.jsonl:1: id: 'a b' has characters"),
    ('{"reference": "r", "distorted": "d",}\n', r"j.jsonl:1: not JSON"),
    ('[1]\n', r"j.jsonl:1: expected a JSON object"),
])
def test_bad_jsonl_rows_name_the_line_and_field(text, where):
    with pytest.raises(JobListError, match="^" + where):
        parse_jobs(text, name="j.jsonl")


def test_bad_csv_names_the_line():
    with pytest.raises(JobListError, match=r"^j.csv:1: the CSV header must name"):
        parse_jobs("ref,dist\nr,d\n", name="j.csv")
    with pytest.raises(JobListError, match=r"^j.csv:2: 4 cells, the header has 2"):
        parse_jobs("reference,distorted\nr,d,x,y\n", name="j.csv")
    with pytest.raises(JobListError, match=r"^j.csv:3: distorted: is required"):
        parse_jobs("reference,distorted\nr,d\nr,\n", name="j.csv")
