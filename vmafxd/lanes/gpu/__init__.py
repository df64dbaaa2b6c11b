"""The GPU lane: one code path for CUDA and HIP over vmafxd.lanes.runtime."""
