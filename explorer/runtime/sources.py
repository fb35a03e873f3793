"""What a model is: the key of the model cache. A model is a pure function of (config, weights
source, device, dtype); the source names the weights by what they are, not by where they lie:
random + seed, a pretrained repository + revision, or a file's sha256, so two sessions on the
same checkpoint share one copy."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from ..book.config import GPT2_BY_REPO, GPTConfig
from ..book.errors import Text


@dataclass(frozen=True)
class WeightsSource:
    """Where a model's weights come from. Equal sources mean equal weights: ``path`` (where
    the file lies now) and ``filename`` are left out of the comparison, the digest is not."""

    kind: str                          # "random", "pretrained", "file" or "trained"
    seed: int | None = None            # random: torch.manual_seed(seed); GPTModel(cfg)
    repo_id: str | None = None         # pretrained: the hub repository ...
    revision: str | None = None        # ... and its commit
    digest: str | None = None          # sha256 of the weights file (pretrained and file)
    filename: str | None = field(default=None, compare=False)
    path: str | None = field(default=None, compare=False)
    layout: str | None = None          # file: "book" or "gpt2" (Hugging Face's names)
    stamp: tuple | None = field(default=None, compare=False)   # (size, mtime) when hashed
    label: str | None = field(default=None, compare=False)     # trained: "trained N steps on …"
    # file: what the explorer's export said of the weights it wrote ("trained N steps on …")
    note: str | None = field(default=None, compare=False)

    @classmethod
    def random(cls, seed: int) -> "WeightsSource":
        return cls("random", seed=seed)

    @classmethod
    def trained(cls, label: str) -> "WeightsSource":
        """A model trained in this server's training lab: it cannot be rebuilt from its key,
        so each snapshot gets its own digest and is held for its session (``ModelCache.hold``).
        """
        return cls("trained", digest=uuid.uuid4().hex, label=label)

    @property
    def caption(self) -> str:
        """For the page: "random, seed 123", "pretrained GPT-2 small (OpenAI)",
        "from file model.safetensors (sha256 ab12cd34…)" (a ``Text``: the page says it in its
        language)."""
        if self.kind == "random":
            return Text("source.random", "random, seed {seed}", seed=self.seed)
        if self.kind == "trained":
            return self.label or Text("source.trained_in_the_lab", "trained in the lab")
        if self.kind == "pretrained":
            size = GPT2_BY_REPO[self.repo_id].page_name if self.repo_id in GPT2_BY_REPO \
                else self.repo_id
            return Text("source.pretrained", "pretrained {size} (OpenAI)", size=size)
        if self.note:
            return Text("source.file_noted", "from file {filename} (sha256 {digest}…): "
                        "{note}", filename=self.filename, digest=(self.digest or "")[:8],
                        note=self.note)
        return Text("source.file", "from file {filename} (sha256 {digest}…)",
                    filename=self.filename, digest=(self.digest or "")[:8])


@dataclass(frozen=True)
class ModelKey:
    config: GPTConfig
    seed: int | None
    device: str
    dtype: str
    source: WeightsSource | None = None   # None: random weights from ``seed``
    # What is changed while the model runs (``explorer.probes.Interventions``), none of it in
    # its weights: such a key's model is the model of ``weights_key``, run with them.
    interventions: tuple = ()

    def __post_init__(self):
        if self.source is None:
            object.__setattr__(self, "source", WeightsSource.random(self.seed))

    @property
    def weights_key(self) -> "ModelKey":
        """The key of the weights alone (the model in the cache)."""
        return replace(self, interventions=()) if self.interventions else self
