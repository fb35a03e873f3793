"""The C uniform_ (explorer/uniform_kernel.c) draws exactly PyTorch's numbers and leaves the
generator exactly where PyTorch would, so a build with it is the book's build."""
import pytest
import torch
import torch.nn as nn

from explorer import uniform_kernel
from explorer.config import GPT_CONFIG_124M, PRESETS
from explorer.model import GPTModel, build_model

needs_kernel = pytest.mark.skipif(not uniform_kernel.available(),
                                  reason="no C compiler, or no rounding matches this PyTorch")


def pytorch_and_kernel(size, low, high, seed, skip):
    """The same draw by PyTorch and by the kernel from generators seeded alike and first
    advanced by ``skip`` draws; returns both tensors and both generators."""
    theirs_generator = torch.Generator().manual_seed(seed)
    mine_generator = torch.Generator().manual_seed(seed)
    for generator in (theirs_generator, mine_generator):
        torch.empty(skip).uniform_(generator=generator)
    theirs = torch.empty(size).uniform_(low, high, generator=theirs_generator)
    mine = uniform_kernel.draw(torch.full((size,), 7.0), low, high, mine_generator)
    return theirs, mine, theirs_generator, mine_generator


@needs_kernel
@pytest.mark.parametrize("size, skip", [(1, 0), (623, 0), (624, 1), (625, 623), (5000, 17),
                                        (1_500_001, 300)])   # the last one over 4 MB: two threads
@pytest.mark.parametrize("low, high", [(-0.0360844, 0.0360844), (0.0, 1.0), (-3.0, 11.5),
                                       (2.0, 2.0)])
def test_the_kernel_draws_pytorchs_numbers_and_leaves_its_state(size, skip, low, high):
    theirs, mine, theirs_generator, mine_generator = pytorch_and_kernel(size, low, high, 123,
                                                                        skip)
    assert torch.equal(mine, theirs)
    assert torch.equal(mine_generator.get_state(), theirs_generator.get_state())
    # ... so what is drawn next, by any of PyTorch's samplers, is the same too.
    assert torch.equal(torch.randn(9, generator=mine_generator),
                       torch.randn(9, generator=theirs_generator))


@needs_kernel
def test_inside_fast_uniform_the_default_generator_runs_as_with_pytorch_alone(monkeypatch):
    def build():
        torch.manual_seed(42)
        layers = [nn.Linear(300, 200), nn.Embedding(50, 8), nn.Linear(200, 40, bias=False)]
        drawn = [p.detach().clone() for layer in layers for p in layer.parameters()]
        drawn += [torch.empty(5000).uniform_(-2, 3),
                  torch.empty(3000).uniform_(**{"from": 0.5, "to": 0.75}),
                  nn.init.uniform_(torch.empty(70, 30), -0.1, 0.2),
                  nn.init.kaiming_uniform_(torch.empty(64, 32), mode="fan_out")]
        return drawn, torch.rand(5)

    with torch.random.fork_rng(devices=[]):
        expected, expected_next = build()
        drawn = []
        real_draw = uniform_kernel.draw
        monkeypatch.setattr(uniform_kernel, "draw",
                            lambda *args: drawn.append(args[0].numel()) or real_draw(*args))
        with uniform_kernel.fast_uniform():
            got, got_next = build()
    assert sorted(drawn) == [2048, 2100, 3000, 5000, 8000, 60000], drawn   # not the 200 bias
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    assert torch.equal(got_next, expected_next)


@needs_kernel
def test_calls_the_kernel_does_not_take_go_to_pytorch(monkeypatch):
    taken = []
    monkeypatch.setattr(uniform_kernel, "draw",
                        lambda *args: taken.append(args) or pytest.fail("kernel used"))
    generator_a, generator_b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    with uniform_kernel.fast_uniform():
        doubles = torch.empty(5000, dtype=torch.float64).uniform_(-1, 1, generator=generator_a)
        strided = torch.empty(100, 60).t().uniform_(-1, 1, generator=generator_a)
        small = torch.empty(10).uniform_(generator=generator_a)
        with pytest.raises(RuntimeError):                    # PyTorch's own check, untouched
            torch.empty(5000).uniform_(2.0, 1.0)
    assert not taken
    assert torch.equal(doubles, torch.empty(5000, dtype=torch.float64).uniform_(
        -1, 1, generator=generator_b))
    assert torch.equal(strided, torch.empty(100, 60).t().uniform_(-1, 1, generator=generator_b))
    assert torch.equal(small, torch.empty(10).uniform_(generator=generator_b))


@needs_kernel
def test_build_model_takes_the_kernel_and_still_builds_the_books_weights(monkeypatch):
    drawn = []
    real_draw = uniform_kernel.draw
    monkeypatch.setattr(uniform_kernel, "draw",
                        lambda *args: drawn.append(args[0].numel()) or real_draw(*args))
    cfg = {**PRESETS["teach-tiny"].to_dict(), "qkv_bias": True}
    built = build_model(cfg, seed=9, device="cpu")
    assert sum(drawn) > 0.9 * sum(p.numel() for n, p in built.named_parameters()
                                  if "emb" not in n and "norm" not in n)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(9)
        book = GPTModel(cfg)
    for key, value in book.state_dict().items():
        assert torch.equal(built.state_dict()[key], value), key


def test_without_a_compiler_the_build_is_pytorchs_own(without_compiler):
    without_compiler(uniform_kernel)
    with pytest.warns(RuntimeWarning, match="uniform_"):
        assert not uniform_kernel.available()
    built = build_model(GPT_CONFIG_124M | {"n_layers": 1}, seed=4, device="cpu")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        book = GPTModel(GPT_CONFIG_124M | {"n_layers": 1})
    for key, value in book.state_dict().items():
        assert torch.equal(built.state_dict()[key], value), key
