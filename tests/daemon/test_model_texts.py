"""open_session's model_texts: a client's path= model arrives as content; the path is never opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmafx.protocol import Limits, RemoteProtocolError
from vmafxd.session import build_plan

BUILTIN = Path(__file__).resolve().parents[2] / "vmafxd" / "model" / "builtin" / "vmaf_v0.6.1.json"


def test_content_is_used_and_the_path_is_only_a_label():
    plan = build_plan(["path=/nonexistent/dir/mine.json:name=mine"], [], Limits(), (), [BUILTIN.read_text()])
    assert [m.name for m in plan.models] == ["mine"]


def test_without_content_a_path_outside_model_dirs_is_refused():
    with pytest.raises(RemoteProtocolError) as e:
        build_plan(["path=/nonexistent/dir/mine.json"], [], Limits(), ())
    assert e.value.field == "models[0].path"


def test_content_for_a_builtin_version_is_refused():
    with pytest.raises(RemoteProtocolError) as e:
        build_plan(["version=vmaf_v0.6.1"], [], Limits(), (), ["{}"])
    assert e.value.field == "model_texts[0]"


def test_bad_content_names_the_model():
    with pytest.raises(RemoteProtocolError) as e:
        build_plan(["path=x.json"], [], Limits(), (), ["{nope"])
    assert e.value.field.startswith("models[0]") and "x.json is not JSON" in str(e.value)
