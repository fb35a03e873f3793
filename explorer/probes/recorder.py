"""The recorders a traced forward pass hands its probe points to."""
from __future__ import annotations

import math

import torch

from ..book.model import model_device
from ..book.probe_points import BLOCK_PROBE_POINTS, PROBE_POINTS
from .attention import attention_in_c, attention_weights
from .budget import ATTENTION_BATCH_BYTES
from .data import ATTENTION_ALL_LAYERS_MAX_TOKENS, HIST_BINS
from .statistics import Scratch, StatsTable, cpu_stats, group_stats
from .vocabulary import HEAD_ROWS, head_product, top_probs
from .. import native

# Not reduced to statistics: the inputs of the embedding, and what attention computes inside
# (its weights are rebuilt from the queries and keys).
UNREDUCED = frozenset(p.name for p in PROBE_POINTS if p.scope in ("input", "attention"))


class Recorder:
    """Receives the probe points of one forward pass and reduces each block's activations to
    statistics as soon as the block ends, so no raw activation outlives its block.

    The forward pass is the plain one (fused attention): the attention weights are recomputed
    from each block's queries and keys (``attention_weights``). The statistics are computed at
    the end of each block on two threads, and the attention for all layers in one batch at the
    end when the input is short, else block by block so that one layer's T x T weights are held
    at a time.
    What it keeps (per-token sums, histogram counts, entropies, lens inputs) goes into buffers
    allocated up front: thousands of small results allocated between the forward pass's large
    temporaries would pin the allocator's heap and keep freed memory from returning to the
    system (the peak RSS of a T=1024 trace then varied from 1x to 2.5x a plain forward's).
    """

    def __init__(self, model, keep_layers, lens_positions, n_tokens, top_k=5, keep_logits=False,
                 entropy=True):
        cfg = model.cfg
        device = model_device(model)
        self.model = model
        self.keep_layers = keep_layers
        self.lens_positions = lens_positions
        self.layer = -1
        self.current: dict[str, dict[str, torch.Tensor]] = {}
        self.block_stats: list[dict[str, dict[str, torch.Tensor]]] = []
        self.final_stats: dict[str, dict[str, torch.Tensor]] = {}
        self.attention: dict[int, torch.Tensor] = {}
        capacity = cfg.n_layers * len(BLOCK_PROBE_POINTS) + 2
        self.per_token = torch.empty((capacity, 6, n_tokens), device=device)
        self.hist = torch.empty((capacity, HIST_BINS + 1), dtype=torch.int64, device=device)
        self.used = 0                                 # rows of per_token / hist filled so far
        use_kernels = device.type == "cpu" and native.stats_available()
        self.scratch = None if use_kernels else Scratch(n_tokens, device)
        self.entropy = torch.full((cfg.n_layers, cfg.n_heads, n_tokens), torch.nan, device=device)
        # Layers whose weights are computed: all of them for the entropy, else the kept ones.
        self.weight_layers = set(range(cfg.n_layers)) if entropy else set(keep_layers)
        self.batch_attention = n_tokens <= ATTENTION_ALL_LAYERS_MAX_TOKENS
        self.queries: torch.Tensor | None = None      # this block's, until its keys arrive
        self.qk: dict[int, tuple] = {}                # layer -> (queries, keys) when batched
        self.lens_inputs = torch.empty((cfg.n_layers, len(lens_positions), cfg.emb_dim),
                                       dtype=model.tok_emb.weight.dtype, device=device)
        self.lens_index = torch.tensor(lens_positions, dtype=torch.int64, device=device)
        self.top_k, self.keep_logits = top_k, keep_logits
        self.next_ids = self.next_probs = None         # (T, top_k), set at final_norm_out
        self.logits: torch.Tensor | None = None        # (T, vocab) when keep_logits
        self.lens_logits: torch.Tensor | None = None   # ((layers - 1) * P, vocab) or None
        self.lens_norm = model.final_norm   # on the lens inputs (an intervention may swap it)
        # This block's distinct activations, and which of them each probe point recorded: a
        # point that is the very same tensor as another (pre-LN: resid_pre is ln1_in) is
        # reduced once. The previous block's output is the next block's resid_pre (and the last
        # one is final_norm_in): its statistics are reused. Holding the tensors keeps ids unique.
        self.pending: list[torch.Tensor] = []
        self.names: dict[str, int] = {}
        self.last_output: torch.Tensor | None = None
        self.last_output_stats: dict | None = None

    def wants_attention(self) -> bool:
        return False        # the fused attention: weights come from the queries and keys

    def record(self, name, x):
        if name == "attn_queries":
            self.queries = x[0]                                     # (heads, T, head_dim)
            return
        if name == "attn_keys":
            if self.layer in self.weight_layers:
                self.qk[self.layer] = (self.queries, x[0])
                if not self.batch_attention:
                    self._keep_attention()
            self.queries = None
            return
        if name in UNREDUCED:           # (attn_pattern: only from a model training with dropout)
            return
        if name == "resid_pre":
            self.layer += 1
            self.current = {}
        target = self.final_stats if name.startswith("final_norm") else self.current
        if x is self.last_output:
            target[name] = self.last_output_stats
        else:
            index = next((i for i, seen in enumerate(self.pending) if seen is x), None)
            if index is None:
                index = len(self.pending)
                self.pending.append(x)
            self.names[name] = index
        if name == "resid_post":
            self._reduce_pending(target)
            if self.lens_positions:
                torch.index_select(x[0], 0, self.lens_index, out=self.lens_inputs[self.layer])
            self.block_stats.append(self.current)
            self.last_output, self.last_output_stats = x, self.current[name]

    def record_final(self, name, x):
        """The final norm's probe points, which ``trace`` records itself (it runs the final
        norm and the head after the blocks). Returns ``x``."""
        self.record(name, x)
        if name == "final_norm_out":
            self._reduce_pending(self.final_stats)
            self.last_output = self.last_output_stats = None
            self._keep_attention()
        return x

    def _keep_attention(self):
        """Attention weights of the layers in ``self.qk`` from their queries and keys (heads,
        T, d): each head's entropy, and the weights of the layers asked for. Several layers'
        scores go into one batch (up to ``ATTENTION_BATCH_BYTES``), so that the steps after
        the products run once per batch rather than once per layer."""
        layers = sorted(self.qk)
        if not layers:
            return
        heads, n, _ = self.qk[layers[0]][0].shape
        per_layer = 4 * heads * n * self.qk[layers[0]][1].shape[1]
        step = max(1, ATTENTION_BATCH_BYTES // per_layer)
        for first in range(0, len(layers), step):
            batch = layers[first:first + step]
            attn_scores = torch.empty((len(batch), heads, n, self.qk[batch[0]][1].shape[1]),
                                      device=self.entropy.device)
            head_dim = self.qk[batch[0]][0].shape[-1]

            def scores():
                for i, layer in enumerate(batch):
                    queries, keys = self.qk[layer]
                    torch.matmul(queries.float(), keys.float().transpose(-2, -1),
                                 out=attn_scores[i])
            scores()
            # sum(w * ln w) per query row (negated and turned into bits in result()).
            plogp = attention_in_c(attn_scores, head_dim)
            weights = attn_scores                                    # (batch, heads, T, S)
            if plogp is None:                 # no compiler, a GPU, or inf/NaN scores
                scores()
                weights = attention_weights(attn_scores, head_dim)
                # ln of the weights clamped to 1e-30: the masked future (w = 0) adds 0 * -69.
                plogp = torch.clamp_min(weights, 1e-30).log_().mul_(weights).sum(-1)
            self.entropy[batch] = plogp
            del plogp
            for layer in batch:
                del self.qk[layer]
            kept = [i for i, layer in enumerate(batch) if layer in self.keep_layers]
            whole = len(kept) == len(batch)      # else copies, so the batch can be freed
            for i in kept:
                self.attention[batch[i]] = (weights[i] if whole else weights[i].clone()).cpu()

    def _reduce_pending(self, target):
        if self.scratch is None:
            stats = cpu_stats([x[0] for x in self.pending], self.per_token, self.hist,
                               self.used)
            self.used += len(self.pending)
        else:
            by_width: dict[int, list[int]] = {}
            for i, x in enumerate(self.pending):
                by_width.setdefault(x.shape[-1], []).append(i)
            stats = [None] * len(self.pending)
            for indices in by_width.values():
                rows = slice(self.used, self.used + len(indices))
                self.used += len(indices)
                group = group_stats([self.pending[i][0] for i in indices],
                                     self.per_token[rows], self.hist[rows], self.scratch)
                for row, (i, s) in enumerate(zip(indices, group), start=rows.start):
                    stats[i] = {**s, "row": row}
        for name, i in self.names.items():
            target[name] = stats[i]
        self.pending, self.names = [], {}

    def head(self, normed):
        """The model's output head on the final norm's output (T, emb_dim), reduced to the
        top-k next tokens at every position. Up to ``HEAD_ROWS`` positions, the lens inputs of
        the earlier blocks join the same product when they are few (the vocabulary-wide
        weights are read once for all of them); longer inputs go ``HEAD_ROWS`` positions at a
        time, so that (T, vocab) logits are never held at once (206 MB for GPT-2 at T=1024),
        unless they were asked for."""
        n = normed.shape[0]
        extra = self.lens_inputs[:-1].flatten(0, 1)                        # ((L-1)*P, emb)
        if n <= HEAD_ROWS:
            if 0 < extra.shape[0] <= HEAD_ROWS:
                logits = head_product(self.model.out_head,
                                       torch.cat([normed, self.lens_norm(extra)]))
                logits, self.lens_logits = logits[:n], logits[n:]
            else:
                logits = head_product(self.model.out_head, normed)
            self.logits = logits.clone() if self.keep_logits else None
            self.next_ids, self.next_probs = top_probs(logits, self.top_k)
            return
        ids, probs, kept = [], [], []
        for start in range(0, n, HEAD_ROWS):
            logits = head_product(self.model.out_head, normed[start:start + HEAD_ROWS])
            if self.keep_logits:
                kept.append(logits.clone())
            chunk_ids, chunk_probs = top_probs(logits, self.top_k)
            ids.append(chunk_ids)
            probs.append(chunk_probs)
        self.next_ids, self.next_probs = torch.cat(ids), torch.cat(probs)
        self.logits = torch.cat(kept) if self.keep_logits else None

    def result(self):
        names = [p for p in BLOCK_PROBE_POINTS if self.block_stats and p in self.block_stats[0]]
        table = StatsTable(self.per_token[:self.used], self.hist[:self.used],
                            [s for layer in self.block_stats for s in layer.values()]
                            + list(self.final_stats.values()))
        points = {p: table.point(p, [layer[p] for layer in self.block_stats]) for p in names}
        final = {p: table.point(p, [s]) for p, s in self.final_stats.items()}
        # NaN where not computed (entropy=False), not a misleading 0 bits.
        entropy = (self.entropy / -math.log(2)).cpu().numpy()
        attention = {k: v.numpy() for k, v in self.attention.items()}
        return {"points": points, "final": final, "attention": attention, "entropy": entropy}


class LayerAttention:
    """Keeps the attention weights of one block."""

    def __init__(self, layer):
        self.layer, self.current, self.weights, self.queries = layer, -1, None, None

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "resid_pre":
            self.current += 1
        elif self.current == self.layer and name == "attn_queries":
            self.queries = x
        elif self.current == self.layer and name == "attn_keys":
            # The trace's own computation: the very same weights.
            queries, keys = self.queries[0].float(), x[0].float()
            scores = (queries @ keys.transpose(-2, -1))[None]             # (1, heads, T, S)
            if attention_in_c(scores, queries.shape[-1]) is None:
                scores = attention_weights((queries @ keys.transpose(-2, -1))[None],
                                            queries.shape[-1])
            self.weights = scores[0].cpu()
