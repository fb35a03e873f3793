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


class RandomStream:
    """A private copy of PyTorch's global random generator, for code that must draw exactly
    what the book's code draws from ``torch.manual_seed`` (dropout masks, the DataLoader's
    shuffles) while other threads draw from their own streams: ``with stream.active():`` puts
    this stream in the global generator, alone, and keeps where it got to for next time."""

    def __init__(self, state: torch.Tensor | None = None, cuda_state: torch.Tensor | None = None):
        self.state = torch.get_rng_state() if state is None else state
        self.cuda_state = cuda_state

    @classmethod
    def current(cls, device=None) -> RandomStream:
        """The global generator's state now (inside ``seeded``: right after what was built);
        also CUDA's when ``device`` is a CUDA device."""
        cuda = (torch.cuda.get_rng_state(device) if device is not None
                and torch.device(device).type == "cuda" else None)
        return cls(torch.get_rng_state(), cuda)

    @contextmanager
    def active(self, device=None):
        with _SEED_LOCK:
            saved = torch.get_rng_state()
            cuda = (self.cuda_state is not None and device is not None
                    and torch.device(device).type == "cuda")
            saved_cuda = torch.cuda.get_rng_state(device) if cuda else None
            torch.set_rng_state(self.state)
            if cuda:
                torch.cuda.set_rng_state(self.cuda_state, device)
            try:
                yield
            finally:
                self.state = torch.get_rng_state()
                torch.set_rng_state(saved)
                if cuda:
                    self.cuda_state = torch.cuda.get_rng_state(device)
                    torch.cuda.set_rng_state(saved_cuda, device)
