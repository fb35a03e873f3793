"""Building a model: a pure function of (config, seed, device, dtype)."""
from __future__ import annotations

import torch

from ..book.config import GPTConfig
from ..book.errors import ExplorerError
from ..book.fast import fuse
from ..book.model import GPTModel
from ..book.seeding import seeded
from .placement import on_zero_gpu

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_device(device: str = "auto") -> torch.device:
    # On ZeroGPU the models live on the CPU, and a GPU is lent per call (``offload``): CUDA
    # cannot start in the server process there, though torch.cuda.is_available() says True.
    zero_gpu = on_zero_gpu()
    if device == "auto":
        if torch.cuda.is_available() and not zero_gpu:
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if zero_gpu:
            raise ExplorerError("device.zero_gpu", "On ZeroGPU the models stay on the CPU and "
                                "a GPU is lent for the long jobs only: use device 'auto'.")
        if not torch.cuda.is_available():
            raise ExplorerError("device.no_cuda", "CUDA is not available on this machine; use "
                                "device 'cpu' or 'auto'.")
        return torch.device("cuda")
    if device == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ExplorerError("device.no_mps", "MPS is not available on this machine; use "
                                "device 'cpu' or 'auto'.")
        return torch.device("mps")
    raise ExplorerError("device.unknown", "device must be 'auto', 'cpu', 'cuda' or 'mps' (got "
                        "{device!r}).", device=device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ExplorerError("dtype.unknown", "dtype must be one of {dtypes} (got {dtype!r}).",
                            dtypes=", ".join(DTYPES), dtype=dtype)
    if dtype == "bfloat16" and device.type == "cpu":
        raise ExplorerError("dtype.bfloat16_on_cpu", "bfloat16 is offered on a GPU only; on the "
                            "CPU use float32.")
    return DTYPES[dtype]


# The seeds torch.manual_seed takes here (one source of truth: the app's links check it too).
SEED_LIMIT = 2 ** 63


def check_seed(seed) -> int:
    """``seed`` if ``build_model`` takes it, else the message why not."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ExplorerError("seed.out_of_range", "seed must be a whole number from 0 to 2**63 - "
                            "1 (got {seed!r}).", seed=seed)
    return seed


def build_model(cfg, seed: int = 123, device: str = "auto", dtype: str = "float32",
                fused: bool = True) -> GPTModel:
    """``torch.manual_seed(seed); GPTModel(cfg)`` as in the book, in eval mode, on ``device``,
    with PyTorch's fused kernels unless ``fused=False`` (the same numbers within rounding).
    Weights are created on the CPU so the same seed gives the same numbers on every device."""
    cfg = GPTConfig.from_dict(cfg)
    check_seed(seed)
    if not isinstance(device, str):
        raise ExplorerError("device.unknown", "device must be 'auto', 'cpu', 'cuda' or 'mps' "
                            "(got {device!r}).", device=device)
    target = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, target)
    with seeded(seed):
        model = GPTModel(cfg)
    if fused:
        fuse(model)
    model.eval()
    model.requires_grad_(False)
    return model.to(device=target, dtype=torch_dtype)
