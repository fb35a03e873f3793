"""The book builds a model right after ``torch.manual_seed(123)``. PyTorch's generator is global
to the process, so two threads seeding and drawing at once would mix their numbers: every seeded
construction in the explorer goes through ``seeded``, one at a time."""
from __future__ import annotations

import threading
from contextlib import contextmanager

import torch

_SEED_LOCK = threading.Lock()


@contextmanager
def seeded(seed: int):
    """``torch.manual_seed(seed)`` for the code inside, alone, and the generator's state as it
    was afterwards."""
    with _SEED_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
