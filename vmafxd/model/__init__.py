"""VMAF models: loading libvmaf's JSON models, predicting, pooling."""

from .loader import BUILTIN_VERSIONS, Model, ModelError, ModelSet, ModelSpec, load_model, parse_model_spec
from .pooling import POOLING_METHODS, RunningPool, pool
from .predict import predict, predict_set

__all__ = [
    "BUILTIN_VERSIONS", "Model", "ModelError", "ModelSet", "ModelSpec", "load_model",
    "parse_model_spec", "POOLING_METHODS", "RunningPool", "pool", "predict", "predict_set",
]
