"""Feature names as models spell them, and the output names they map to.

Models name their inputs the way libvmaf's extractors do internally
(``VMAF_integer_feature_adm2_score``); the logs print the short alias
(``integer_adm2``).  Our declarations provide the short names, so a model's
feature is found by aliasing it first.  Names without an alias pass through
(``VMAF_integer_feature_motion_sad_score`` is printed as is).
"""

from __future__ import annotations

__all__ = ["alias", "ALIASES"]

ALIASES: dict[str, str] = {}
for _short in ("adm2", "aim", "adm3", "adm_scale0", "adm_scale1", "adm_scale2", "adm_scale3",
               "motion", "motion2", "motion3",
               "vif_scale0", "vif_scale1", "vif_scale2", "vif_scale3"):
    ALIASES[f"VMAF_feature_{_short}_score"] = _short
for _short in ("adm2", "aim", "adm3", "motion", "motion2", "motion3",
               "vif_scale0", "vif_scale1", "vif_scale2", "vif_scale3"):
    ALIASES[f"VMAF_integer_feature_{_short}_score"] = f"integer_{_short}"
ALIASES["Cambi_feature_cambi_score"] = "cambi"
for _short in ("u", "v", "uv"):
    ALIASES[f"Speed_chroma_feature_speed_chroma_{_short}_score"] = f"speed_chroma_{_short}"
ALIASES["Speed_temporal_feature_speed_temporal_score"] = "speed_temporal"


def alias(name: str) -> str:
    return ALIASES.get(name, name)
