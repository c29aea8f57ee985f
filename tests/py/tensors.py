"""Tensors shared by the Python tests: every dtype safetensors stores, and random tensors
of any dtype with exact bit patterns (bytes drawn at random, then viewed as the dtype)."""
from __future__ import annotations

import numpy as np
import torch

SAFETENSORS_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
                      torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
                      torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                      torch.float8_e5m2fnuz, torch.float8_e8m0fnu]


def random_tensor(dtype: torch.dtype, shape: tuple, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = int(np.prod(shape)) if shape else 1
    raw = torch.randint(0, 256, (n * torch.empty((), dtype=dtype).element_size(),), dtype=torch.uint8, generator=g)
    if dtype == torch.bool:
        return (raw % 2).to(torch.bool).reshape(shape)
    return raw.view(dtype).reshape(shape)
