"""One registry of features: the declarations are what the CPU lane, the GPU engine and the
kernels' parameter blocks read (docs/lanes.md, "Adding a feature")."""

from __future__ import annotations

import importlib
import importlib.resources
import importlib.util
import re

import numpy as np
import pytest

from vmafxd import features
from vmafxd.features import adm
from vmafxd.features.declaration import FeatureDeclaration
from vmafxd.lanes.gpu import kernels
from vmafxd.lanes.gpu.engine import twin_modules


def test_gpu_twins_and_kernels_come_from_the_declarations():
    decls = features.all_declarations()
    assert twin_modules() == {d.name: d.gpu for d in decls if d.gpu}
    assert {"psnr", "motion", "vif", "adm", "float_ssim", "float_ms_ssim"} <= set(twin_modules())
    for d in decls:
        if d.gpu is None:
            continue
        assert d.kernel in kernels.SOURCES, d.name
        if importlib.util.find_spec(f"vmafxd.lanes.gpu.{d.gpu}") is not None:
            assert callable(importlib.import_module(f"vmafxd.lanes.gpu.{d.gpu}").make), d.name
    assert set(kernels.SOURCES) == {"convert.cu", *(d.kernel for d in decls if d.kernel)}


def test_the_gpu_lane_offers_exactly_the_declared_twins():
    from vmafxd.lanes.gpu.lane import GpuLane

    lane = GpuLane.__new__(GpuLane)  # features() reads only the registry
    assert lane.features() == sorted(d.name for d in features.all_declarations() if d.gpu)


def test_adm_parameter_indices_are_generated_not_written_by_hand():
    raw = (importlib.resources.files("vmafxd.features") / "kernels" / "adm.cu").read_text()
    assert not re.search(r"^\s*#define\s+P_", raw, re.M), "adm.cu must not define its parameter indices itself"
    full = kernels.source("adm.cu")
    head, _, body = full.partition('#line 1 "adm.cu"')
    got = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (P_\w+) (\d+)", head)}
    # the indices the kernel reads, at the offsets the host packs them
    names = adm.DECLARATION.kernel_param_names()
    assert got["P_COUNT"] == len(names) == 42
    for name in ("w", "irf0", "sub0", "vr_lo", "egl_int", "skip_aim"):
        assert got[f"P_{name.removesuffix('0').upper()}"] == names.index(name)
    for used in set(re.findall(r"\bP_[A-Z_]+\b", body)):
        assert used in got, used


def test_kernel_tables_are_written_exactly_one_brace_per_dimension():
    d = FeatureDeclaration("demo", ("m",), kernel_tables=(("float t[2][2]", np.float32([[0.1, 2], [3, 4]])),
                                                          ("int k[3]", (1, -2, 3))))
    assert d.kernel_table_source().splitlines()[1:] == [
        "__constant__ float t[2][2] = {{0.10000000149011612, 2.0}, {3.0, 4.0}};",  # float32(0.1) to the bit
        "__constant__ int k[3] = {1, -2, 3};",
    ]
    with pytest.raises(TypeError, match="finite"):
        FeatureDeclaration("demo", ("m",), kernel_tables=(("float t[1]", [float("nan")]),)).kernel_table_source()


def test_pack_kernel_params_takes_every_declared_name_once():
    d = FeatureDeclaration("demo", ("m",), kernel_params=(("w", 1), ("irf", 3), ("flag", 1)))
    assert d.kernel_param_names() == ("w", "irf0", "irf1", "irf2", "flag")
    assert d.pack_kernel_params({"flag": 1, "irf": (4, 5, 6), "w": 9}) == [9, 4, 5, 6, 1]
    assert "#define P_IRF 1\n#define P_FLAG 4\n#define P_COUNT 5" in d.kernel_defines()
    with pytest.raises(KeyError):
        d.pack_kernel_params({"w": 1, "irf": (1, 2, 3)})
    with pytest.raises(KeyError, match="typo"):
        d.pack_kernel_params({"w": 1, "irf": (1, 2, 3), "flag": 0, "typo": 1})
    with pytest.raises(ValueError, match="irf takes 3"):
        d.pack_kernel_params({"w": 1, "irf": (1, 2), "flag": 0})


def test_adm_without_its_generated_indices_does_not_compile():
    from vmafxd.lanes.errors import CompileError

    from .conftest import load_runtime

    rt, _ = load_runtime("emu")
    bare = kernels._read("vmafx_prelude.h") + '\n#line 1 "adm.cu"\n' + kernels._read("adm.cu")
    with pytest.raises(CompileError) as e:
        rt.compile(bare, "adm.cu", "emu", kernels.COMMON_OPTIONS)
    assert "generated parameter indices" in e.value.log


def test_the_index_rows_are_the_declarations():
    # the registry's index (module -> extractor names, kernel) lets a lookup import one
    # module; each row must say what the module's DECLARATION says, and no name twice
    seen: dict[str, str] = {}
    for module, (names, kernel) in features._INDEX.items():
        decl = importlib.import_module(f"vmafxd.features.{module}").DECLARATION
        assert names == (decl.name, *decl.aliases), module
        assert kernel == decl.kernel, module
        for n in names:
            assert n not in seen, f"{n} declared by {seen.get(n)} and {module}"
            seen[n] = module
        assert features.get(decl.name) is decl
    assert features.kernel_sources() == tuple(sorted({d.kernel for d in features.all_declarations() if d.kernel}))
    assert [d.name for d in features.kernel_declarations("ssim.cu")] == ["float_ssim", "float_ms_ssim"]


def test_a_plan_imports_only_its_features():
    # what vmafxctl's start-up relies on: the default model's plan (VIF, ADM, motion) imports
    # those three feature modules and no other; asking for one more by name adds just it
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from vmafxd.core.scoring import ScoringPlan, parse_feature_spec\n"
        "from vmafxd.offline import resolve_models\n"
        "from vmafxd.lanes.gpu import kernels\n"
        "kernels.source('adm.cu')\n"
        "ScoringPlan.build(resolve_models([]), [parse_feature_spec('psnr_hvs')])\n"
        "print(' '.join(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('vmafxd.features.')"
        " and not m.rsplit('.', 1)[1].startswith('_') and m.rsplit('.', 1)[1] not in ('declaration', 'names'))))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.split() == ["adm", "motion", "psnr_hvs", "vif"]
