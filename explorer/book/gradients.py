"""The gradient side of the shortcut lesson (the book's section 4.4): one backward pass and the
mean absolute gradient per layer, with and without shortcut connections."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from .config import GPTConfig
from .errors import ExplorerError
from .model import GELU, GPTModel
from .seeding import seeded

BOOK_LAYER_SIZES = [3, 3, 3, 3, 3, 1]
BOOK_SAMPLE_INPUT = [[1.0, 0.0, -1.0]]


class ExampleDeepNeuralNetwork(nn.Module):
    """The book's five Linear + GELU layers; a shortcut adds a layer's input to its output
    whenever their shapes match."""

    def __init__(self, layer_sizes, use_shortcut):
        super().__init__()
        self.use_shortcut = use_shortcut
        self.layers = nn.ModuleList([
            nn.Sequential(nn.Linear(layer_sizes[i], layer_sizes[i + 1]), GELU())
            for i in range(len(layer_sizes) - 1)])

    def forward(self, x):
        for layer in self.layers:
            # Compute the output of the current layer
            layer_output = layer(x)
            # Check if shortcut can be applied
            if self.use_shortcut and x.shape == layer_output.shape:
                x = x + layer_output
            else:
                x = layer_output
        return x


def shortcut_demo(use_shortcut: bool, seed: int = 123) -> dict[str, float]:
    """The book's ``print_gradients`` as data: weight name -> mean |gradient| after one MSE
    backward pass on input [[1., 0., -1.]] with target [[0.]], the network built right after
    ``torch.manual_seed(seed)``."""
    with seeded(seed):
        model = ExampleDeepNeuralNetwork(BOOK_LAYER_SIZES, use_shortcut=use_shortcut)
    output = model(torch.tensor(BOOK_SAMPLE_INPUT))
    target = torch.tensor([[0.0]])
    loss = nn.MSELoss()(output, target)
    loss.backward()
    return {name: param.grad.abs().mean().item()
            for name, param in model.named_parameters() if "weight" in name}


@dataclass
class GPTGradients:
    """Mean |gradient| of the weights after one next-token cross-entropy backward pass."""

    embedding: float
    blocks: list[float]          # all weights of each block
    attention: list[float]       # W_query, W_key, W_value, out_proj per block
    feed_forward: list[float]    # the two Linear layers per block
    output_head: float
    loss: float


def gpt_gradients(cfg, token_ids, seed: int = 123) -> GPTGradients:
    """Build ``cfg`` fresh under ``seed`` (dropout off) and run one backward pass of the
    next-token loss on ``token_ids`` (at least two tokens)."""
    cfg = GPTConfig.from_dict(cfg)
    ids = torch.tensor([list(token_ids)])
    if ids.shape[1] < 2:
        raise ExplorerError("gradients.too_few_tokens", "The gradient demo needs at least two "
                            "tokens: one to predict from, one to predict.")
    with seeded(seed):
        model = GPTModel(cfg)
    model.eval()  # no dropout: the same gradients every run
    logits = model(ids[:, -cfg.context_length:])
    targets = ids[:, -cfg.context_length:]
    loss = nn.functional.cross_entropy(logits[0, :-1].float(), targets[0, 1:])
    loss.backward()

    def mean_abs(params):
        grads = [p.grad.abs().flatten() for p in params if p.grad is not None and p.dim() > 1]
        return torch.cat(grads).mean().item() if grads else 0.0

    blocks = list(model.trf_blocks)
    return GPTGradients(
        embedding=mean_abs([model.tok_emb.weight]),
        blocks=[mean_abs(b.parameters()) for b in blocks],
        attention=[mean_abs(b.att.parameters()) for b in blocks],
        feed_forward=[mean_abs(b.ff.parameters()) for b in blocks],
        output_head=mean_abs([model.out_head.weight]),
        loss=loss.item())
