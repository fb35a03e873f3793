"""Interventions written again, independently of ``explorer.probes.intervening``: PyTorch
forward hooks (and module swaps) on a private copy of the book's ``GPTModel``, with running
means computed by a plain loop. What the tests check the explorer's interventions against."""
import copy

import torch
import torch.nn as nn

from explorer.probes.interventions import Interventions


def running_mean_by_loop(v):
    """v (b, T, ...) -> at each t the mean of v[:, :t + 1]."""
    return torch.stack([v[:, :t + 1].mean(dim=1) for t in range(v.shape[1])], dim=1)


def frozen_norm_hook(norm, args, output):
    x = args[0]
    mean = running_mean_by_loop(x.mean(dim=-1))
    var = running_mean_by_loop(x.var(dim=-1, unbiased=False))
    return norm.scale * (x - mean[..., None]) / torch.sqrt(var[..., None] + norm.eps) + norm.shift


def heads_hook(heads, head_dim, mean):
    """A pre-hook on out_proj: the heads' slices of its input zeroed, or their running mean."""
    def hook(module, args):
        x = args[0].clone()
        for h in heads:
            part = slice(h * head_dim, (h + 1) * head_dim)
            x[..., part] = running_mean_by_loop(x[..., part]) if mean else 0.0
        return (x,)
    return hook


def block_by_hand(block, x, att_shortcut=True, ff_shortcut=True):
    """TransformerBlock.forward written out, each shortcut optional (eval mode)."""
    placement = block.norm_placement
    shortcut = x
    if placement == "pre":
        x = block.norm1(x)
    x = block.att(x)
    if att_shortcut:
        x = x + shortcut
    if placement == "post":
        x = block.norm1(x)
    shortcut = x
    if placement == "pre":
        x = block.norm2(x)
    x = block.ff(x)
    if ff_shortcut:
        x = x + shortcut
    if placement == "post":
        x = block.norm2(x)
    return x


def zeros_hook(module, args, output):
    return torch.zeros_like(output)


def _patch_place(model, item, layer):
    """(module, pre-hook?) whose input (pre) or output a patch of ``item`` replaces."""
    block = model.trf_blocks[layer]
    return {"patch_heads": (block.att.out_proj, True), "patch_att": (block.att, False),
            "patch_ff": (block.ff, False), "patch_resid": (block, True)}[item.kind]


def _clean_value(model, item, layer):
    """The value at a patch's place in a plain run of ``model`` on its source ids (1, T, ...)."""
    module, pre = _patch_place(model, item, layer)
    saved = {}

    def keep(m, args, output=None):
        saved["v"] = (args[0] if pre else output).detach().clone()
    handle = (module.register_forward_pre_hook if pre else module.register_forward_hook)(keep)
    with torch.no_grad():
        model(torch.tensor([list(item.source)]))
    handle.remove()
    return saved["v"]


def patch_hook(item, clean, head_dim, pre):
    """Positions 0 .. min(T, T_clean) - 1 (or the one position) of the value replaced by the
    clean run's, only the heads' slices of out_proj's input for a head patch."""
    def put(module, args, output=None):
        x = (args[0] if pre else output).clone()
        n = min(x.shape[1], clean.shape[1])
        positions = range(n) if item.position is None else [
            p for p in (item.position,) if p < n]
        for p in positions:
            if item.heads:
                for h in item.heads:
                    part = slice(h * head_dim, (h + 1) * head_dim)
                    x[:, p, part] = clean[0, p, part]
            else:
                x[:, p] = clean[0, p]
        return ((x,) + tuple(args[1:])) if pre else x
    return put


def hooked_copy(model, spec):
    """A deepcopy of ``model`` (the book's GPTModel, eval) that computes ``spec`` by hooks."""
    items = Interventions.of(spec)
    cfg = model.cfg
    cleans = {(item, layer): _clean_value(model, item, layer) for item in items
              if item.kind.startswith("patch_") for layer in item.layers(cfg.n_layers)}
    model = copy.deepcopy(model)
    for item in items:
        for layer in item.layers(cfg.n_layers) or [None]:
            block = model.trf_blocks[layer] if layer is not None else None
            kind = item.kind
            if kind.startswith("patch_"):
                module, pre = _patch_place(model, item, layer)
                hook = patch_hook(item, cleans[(item, layer)], cfg.head_dim, pre)
                (module.register_forward_pre_hook if pre else module.register_forward_hook)(hook)
            elif kind in ("zero_heads", "mean_heads"):
                block.att.out_proj.register_forward_pre_hook(
                    heads_hook(item.heads, cfg.head_dim, kind == "mean_heads"))
            elif kind == "zero_att":
                block.att.register_forward_hook(zeros_hook)
            elif kind == "zero_ff":
                block.ff.register_forward_hook(zeros_hook)
            elif kind in ("identity_norm1", "identity_norm2"):
                setattr(block, kind[-5:], nn.Identity())
            elif kind in ("freeze_norm1", "freeze_norm2"):
                getattr(block, kind[-5:]).register_forward_hook(frozen_norm_hook)
            elif kind.startswith("remove_"):
                att = kind in ("remove_shortcut", "remove_att_shortcut")
                ff = kind in ("remove_shortcut", "remove_ff_shortcut")
                block.register_forward_hook(
                    lambda b, args, out, att=att, ff=ff: block_by_hand(b, args[0], not att,
                                                                       not ff))
            elif kind == "relu_ff":
                block.ff.layers[1] = nn.ReLU()
            elif kind == "zero_pos_emb":
                model.pos_emb.register_forward_hook(zeros_hook)
            elif kind == "identity_final_norm":
                model.final_norm = nn.Identity()
            elif kind == "freeze_final_norm":
                model.final_norm.register_forward_hook(frozen_norm_hook)
            else:
                raise AssertionError(kind)
    return model


def with_random_norms(model, seed=0):
    """LayerNorm scales and shifts away from 1 and 0, so that a norm's removal shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".scale"):
                p.copy_(1 + 0.5 * torch.randn(p.shape, generator=g))
            elif name.endswith(".shift"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
    return model
