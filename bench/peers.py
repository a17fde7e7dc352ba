"""The peers the benchmarks compare with, set up the same way everywhere: fp32 with TF32 off."""

from __future__ import annotations


def cuda_torch():
    """torch with CUDA and TF32 off (cuBLAS and cuDNN compute in true fp32), or None when torch
    or a CUDA device is missing."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch
