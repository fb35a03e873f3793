"""The training lab (chapter 5): the book's loop reproduced number for number, variants side by
side on the same batches, Stop/Continue, divergence, bad data and the server's limits. Tiny
configs and few steps: the whole file runs in seconds."""
import math
import threading
from dataclasses import replace

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from explorer.book.config import GPTConfig, count_parameters
from explorer.book.fast import fuse
from explorer.book.model import GPTModel
from explorer.book.tokenizer import get_tokenizer
from explorer.book.training import (calc_loss_loader, check_training_text, generate_sample,
                                    split_text)
from explorer.runtime.training.job import TrainingJob
from explorer.runtime.training.lab import TrainingLab
from explorer.runtime.training.run import adamw, first_batches, mean_loss
from explorer.runtime.training.setup import (
    Corpus, TrainingSettings, Variant, corpus_from_file, corpus_from_text, default_corpus,
    job_bytes, make_variants, param_steps)

# Small enough that a step takes milliseconds; the book's dropout (0.1) and no qkv bias.
TINY = GPTConfig(context_length=32, emb_dim=16, n_heads=2, n_layers=2, drop_rate=0.1)
STORY = default_corpus().text


def short_corpus(chars=2000):
    return Corpus("the story's start", STORY[:chars])


# ---------------------------------------------------------------------------------------------
# The book's chapter-5 code, written here from its definition, to check the lab against.
class BookDataset(Dataset):
    def __init__(self, txt, tokenizer, max_length, stride):
        self.input_ids, self.target_ids = [], []
        token_ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        for i in range(0, len(token_ids) - max_length, stride):
            self.input_ids.append(torch.tensor(token_ids[i:i + max_length]))
            self.target_ids.append(torch.tensor(token_ids[i + 1:i + max_length + 1]))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        return self.input_ids[idx], self.target_ids[idx]


def book_loader(txt, batch_size, max_length, stride, shuffle, drop_last):
    # tiktoken.get_encoding("gpt2") downloads; the same encoding, offline:
    dataset = BookDataset(txt, get_tokenizer().encoding, max_length, stride)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                      num_workers=0)


def book_loss_batch(input_batch, target_batch, model):
    logits = model(input_batch)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())


def book_loss_loader(loader, model, num_batches):
    if len(loader) == 0:
        return float("nan")
    num_batches = min(num_batches, len(loader))
    total = 0.0
    for i, (x, y) in enumerate(loader):
        if i < num_batches:
            total += book_loss_batch(x, y, model).item()
        else:
            break
    return total / num_batches


def book_train(text, cfg, num_epochs, max_steps):
    """Section 5.2 as printed (train_model_simple), stopping after ``max_steps`` steps."""
    train_data, val_data = text[:int(0.90 * len(text))], text[int(0.90 * len(text)):]
    torch.manual_seed(123)
    train_loader = book_loader(train_data, 2, cfg.context_length, cfg.context_length,
                               shuffle=True, drop_last=True)
    val_loader = book_loader(val_data, 2, cfg.context_length, cfg.context_length,
                             shuffle=False, drop_last=False)
    torch.manual_seed(123)
    model = GPTModel(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)
    train_losses, val_losses, track_tokens_seen, steps = [], [], [], []
    tokens_seen, global_step = 0, -1
    for epoch in range(num_epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = book_loss_batch(input_batch, target_batch, model)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            if global_step % 5 == 0:
                model.eval()
                with torch.no_grad():
                    train_losses.append(book_loss_loader(train_loader, model, 5))
                    val_losses.append(book_loss_loader(val_loader, model, 5))
                model.train()
                track_tokens_seen.append(tokens_seen)
                steps.append(global_step)
            if global_step + 1 == max_steps:
                return steps, train_losses, val_losses, track_tokens_seen
        # generate_and_print_sample: greedy, so it draws no random numbers; left out here
    return steps, train_losses, val_losses, track_tokens_seen


@pytest.fixture(scope="module")
def book_run():
    corpus = short_corpus()          # 6 batches an epoch: 20 steps cross three epoch ends
    return corpus, book_train(corpus.text, TINY, num_epochs=5, max_steps=20)


def test_book_settings_reproduce_the_books_training_loop(book_run):
    corpus, (steps, train, val, tokens) = book_run
    assert steps == [0, 5, 10, 15]
    job = TrainingJob([Variant("book", TINY)], corpus, TrainingSettings(steps=20)).advance(20)
    view = job.view()
    run = view.runs[0]
    assert view.epoch == 3 and view.batches_per_epoch == 6
    assert run.eval_steps[:4] == steps
    assert run.eval_tokens[:4] == tokens
    for ours, book in [(run.train_losses[:4], train), (run.val_losses[:4], val)]:
        assert max(abs(a - b) for a, b in zip(ours, book)) < 1e-3, (ours, book)


def test_the_labs_evaluation_is_the_books_calc_loss_loader_with_a_short_last_batch():
    # 9 windows of 32 tokens: batches of 2, 2, 2, 2 and 1. The book averages the batches' mean
    # losses, so the short batch weighs as much as a full one (a mean over tokens would not).
    loader = book_loader(STORY[:1300], 2, 32, 32, shuffle=False, drop_last=False)
    assert [len(x) for x, _ in loader] == [2, 2, 2, 2, 1]
    torch.manual_seed(123)
    model = fuse(GPTModel(TINY)).eval()
    with torch.no_grad():
        lab = mean_loss(first_batches(loader, 5), model, "cpu")
        book = calc_loss_loader(loader, model, "cpu", num_batches=5)
        by_tokens = torch.nn.functional.cross_entropy(
            torch.cat([model(x) for x, _ in loader]).flatten(0, 1),
            torch.cat([y for _, y in loader]).flatten()).item()
    assert abs(lab - book) < 1e-5, (lab, book)
    assert abs(by_tokens - book) > 1e-5   # the check can tell the two means apart


def test_gradient_norms_are_each_blocks_l2_norm():
    job = TrainingJob([Variant("book", TINY)], short_corpus(), TrainingSettings(steps=2))
    job.advance(1)
    blocks = job.runs[0].model.trf_blocks     # its gradients are still those of step 0
    expected = [math.sqrt(sum(p.grad.double().pow(2).sum().item() for p in b.parameters()))
                for b in blocks]
    assert job.view().runs[0].grad_norms[0] == pytest.approx(expected, rel=1e-5)


class CudaCalled(Exception):
    pass


def test_a_cpu_step_asks_no_gpu_even_where_cuda_says_it_is_there(monkeypatch):
    """On a ZeroGPU Space the server's torch.cuda.is_available() says True (the ``spaces``
    client's CUDA emulation), but no CUDA may start there. AdamW's step asked CUDA whether a
    graph was being captured (torch 2.11 through torch.cuda, 2.13 through torch.accelerator):
    the lab's optimizer asks neither while its weights are on the CPU, and its update is
    torch.optim.AdamW's."""
    settings = TrainingSettings()
    torch.manual_seed(0)
    model = GPTModel(TINY)
    reference = GPTModel(TINY)
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(0, TINY.vocab_size, (2, 8))
    for m in (model, reference):
        m.eval()(ids).logsumexp(-1).mean().backward()   # no dropout: the same gradients
    optimizer = adamw(model, settings)
    expected = torch.optim.AdamW(reference.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay,
                                 fused=optimizer.defaults["fused"])
    expected.step()

    def cuda_called(*args, **kwargs):
        raise CudaCalled
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", cuda_called)
    monkeypatch.setattr(torch.cuda, "current_stream", cuda_called)
    monkeypatch.setattr(torch.accelerator, "current_stream", cuda_called)
    optimizer.step()
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got, want)
    # Weights that are not on the CPU keep torch's check (meta stands in for a GPU here).
    on_meta = adamw(GPTModel(TINY).to("meta"), settings)
    for p in on_meta.param_groups[0]["params"]:
        p.grad = torch.zeros_like(p)
    with pytest.raises(CudaCalled):
        on_meta.step()


def test_another_seed_gives_other_losses_so_the_check_can_fail(book_run):
    corpus, (_, train, _, _) = book_run
    job = TrainingJob([Variant("book", TINY)], corpus,
                      TrainingSettings(steps=16, seed=124)).advance(16)
    assert max(abs(a - b) for a, b in zip(job.view().runs[0].train_losses, train)) > 1e-2


# ---------------------------------------------------------------------------------------------
# Variants side by side
def curves(run):
    return (run.eval_steps, run.eval_tokens, run.train_losses, run.val_losses, run.grad_steps,
            run.grad_norms, run.sample, run.tokens_seen, run.diverged_at)


SIDE_BY_SIDE = [Variant("pre-LN", TINY), Variant("post-LN", TINY.replace(norm_placement="post"))]


def test_same_seed_same_curves_even_with_two_sessions_training_at_once():
    settings = TrainingSettings(steps=8, eval_freq=3, eval_iter=2, sample_tokens=5)
    alone = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(8).view()
    lab = TrainingLab(max_jobs=2)
    # two different jobs at once (the same first variant, another beside it)
    other = [SIDE_BY_SIDE[0], Variant("relu", TINY.replace(activation="relu"))]
    jobs = [lab.start("a", SIDE_BY_SIDE, short_corpus(), settings),
            lab.start("b", other, short_corpus(), settings)]
    assert jobs[0] is not jobs[1] and len(lab) == 2
    for job in jobs:
        assert job.wait(60)
    views = [job.view() for job in jobs]
    assert all(v.status == "finished" for v in views), [v.message for v in views]
    assert [curves(r) for r in views[0].runs] == [curves(r) for r in alone.runs]
    assert curves(views[1].runs[0]) == curves(alone.runs[0])
    assert alone.runs[0].train_losses != alone.runs[1].train_losses   # the variants differ


def _weights(trained):
    return [p.detach().clone() for p in trained.model.parameters()]


def test_sessions_asking_for_the_same_job_share_one_and_get_its_result():
    settings = TrainingSettings(steps=6, eval_freq=2, eval_iter=1, sample_tokens=4)
    alone = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(6).view()
    lab = TrainingLab(max_jobs=1)       # eight sessions, one job: nobody is refused
    jobs = {lab.start(s, SIDE_BY_SIDE, short_corpus(), settings) for s in "abcdefgh"}
    try:
        assert len(jobs) == 1 and len(lab) == 1
        job = jobs.pop()
        assert lab.members(job) == 8 and job.wait(60)
        assert [curves(r) for r in job.view().runs] == [curves(r) for r in alone.runs]
        # a finished job asked for again is the same job, at once
        assert lab.start("i", SIDE_BY_SIDE, short_corpus(), settings) is job
        a, b = _weights(job.trained_model(0)), _weights(job.trained_model(0))
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    finally:
        for s in "abcdefghi":
            lab.cancel(s)


def test_one_sessions_stop_never_stops_anothers_training():
    settings = TrainingSettings(steps=40, eval_freq=10, eval_iter=1, sample_tokens=2)
    alone = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(40).view()
    lab = TrainingLab()
    job = lab.start("a", SIDE_BY_SIDE, short_corpus(), settings)
    try:
        assert lab.start("b", SIDE_BY_SIDE, short_corpus(), settings) is job
        while job.view().step < 2 and job.running:
            threading.Event().wait(0.005)
        lab.stop("a")
        assert job.running, "b still watches: the job trains on"
        assert not lab.watching("a", job) and lab.watching("b", job)
        lab.stop("b")                       # nobody watches: now it stops
        assert not job.running and job.view().status in ("stopped", "finished")
        assert lab.resume("a") is job and lab.watching("a", job) and not lab.watching("b", job)
        assert job.wait(60) and job.view().status == "finished"
        assert [curves(r) for r in job.view().runs] == [curves(r) for r in alone.runs]
        # one of them leaving (closing the tab) leaves the job to the other
        assert lab.cancel("a") and lab.job("b") is job and job.view().status == "finished"
    finally:
        lab.cancel("a")
        lab.cancel("b")


def test_a_new_job_is_never_forgotten_among_the_finished_ones_kept():
    from explorer.runtime.training.lab import MAX_KEPT_ENDED
    settings = TrainingSettings(steps=1, eval_freq=1, eval_iter=1, sample_tokens=1)
    lab = TrainingLab()
    # one session trains job after job: the finished ones stay for anyone who asks again
    for seed in range(MAX_KEPT_ENDED + 2):
        job = lab.start("a", SIDE_BY_SIDE, short_corpus(), replace(settings, seed=seed))
        assert job.wait(60) and lab.job("a") is job
    assert len(lab) == MAX_KEPT_ENDED + 1          # the session's own, and the 4 newest
    new = lab.start("a", SIDE_BY_SIDE, short_corpus(), replace(settings, steps=400))
    try:
        assert lab.job("a") is new and lab.watching("a", new) and new.running
    finally:
        lab.cancel("a")


def test_the_last_session_leaving_a_running_job_cancels_it():
    settings = TrainingSettings(steps=400, eval_freq=100, eval_iter=1, sample_tokens=2)
    lab = TrainingLab()
    job = lab.start("a", SIDE_BY_SIDE, short_corpus(), settings)
    lab.start("b", SIDE_BY_SIDE, short_corpus(), settings)
    assert lab.cancel("a") and job.running
    assert lab.cancel("b") and job.view().status == "cancelled" and len(lab) == 0


def test_a_variant_twice_learns_the_same_and_sees_the_same_batches():
    settings = TrainingSettings(steps=7, eval_freq=3, eval_iter=2, sample_tokens=5)
    view = TrainingJob([SIDE_BY_SIDE[0], SIDE_BY_SIDE[0]], short_corpus(), settings) \
        .advance(7).view()
    assert curves(view.runs[0]) == curves(view.runs[1])
    # The first variant's result does not depend on what trains beside it.
    other = TrainingJob([SIDE_BY_SIDE[0], Variant("relu", TINY.replace(activation="relu"))],
                        short_corpus(), settings).advance(7).view()
    assert curves(other.runs[0]) == curves(view.runs[0])


def test_the_loss_falls_on_the_default_corpus_for_the_default_preset():
    variant = make_variants(["pre-LN (book)"])[0]
    settings = TrainingSettings(steps=16, context_length=32, lr=0.004, eval_freq=15,
                                eval_iter=2, sample_tokens=5)
    job = TrainingJob([variant], default_corpus(), settings).advance(16)
    view = job.view()
    run = view.runs[0]
    assert run.eval_steps == [0, 15]
    assert run.train_losses[-1] < run.train_losses[0] - 2.0, run.train_losses
    assert run.val_losses[-1] < run.val_losses[0] - 2.0, run.val_losses
    assert len(run.grad_norms[0]) == variant.config.n_layers
    assert view.tokens_seen == 16 * 2 * 32 == run.tokens_seen
    assert run.sample.startswith("Every effort moves you") and run.sample_step == 15
    # The lab's sample (KV cache) is the book's generate_and_print_sample text.
    model = job.trained_model().model.train()
    assert run.sample == generate_sample(model, get_tokenizer(), "cpu", "Every effort moves you",
                                         max_new_tokens=5)


def test_a_diverging_variant_is_reported_not_crashed():
    settings = TrainingSettings(steps=12, lr=1e20, eval_freq=4, eval_iter=1, sample_tokens=5)
    job = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).start()
    assert job.wait(60)
    view = job.view()
    assert view.status == "finished"
    for run in view.runs:
        assert run.diverged and run.diverged_at is not None and "diverged" in run.note
        assert all(math.isfinite(x) for x in run.train_losses)
    assert "Diverged" in view.message
    assert view.step <= 12


# ---------------------------------------------------------------------------------------------
# Stop and Continue; the trained model
def test_stop_and_continue_resume_exactly():
    settings = TrainingSettings(steps=10, eval_freq=4, eval_iter=1, sample_tokens=5)
    uninterrupted = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(10).view()

    job = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).start()
    while job.view().step < 3 and job.running:
        threading.Event().wait(0.005)
    job.stop()
    stopped = job.view()
    assert stopped.status == "stopped" and 3 <= stopped.step < 10, stopped.step
    job.resume()
    assert job.wait(60)
    view = job.view()
    assert view.status == "finished" and view.step == 10
    assert [curves(r) for r in view.runs] == [curves(r) for r in uninterrupted.runs]

    in_parts = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(5).advance(5).view()
    assert [curves(r) for r in in_parts.runs] == [curves(r) for r in uninterrupted.runs]


def test_a_trained_model_saved_and_reloaded_gives_identical_logits(tmp_path):
    from explorer.book.generate import generate_steps
    from explorer.runtime.build import build_model

    settings = TrainingSettings(steps=4, sample_tokens=5)
    job = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(3)
    trained = job.trained_model(1)
    assert trained.weights_source == "trained 3 steps on the story's start"
    model = trained.model
    assert isinstance(model, GPTModel) and not model.training
    assert not any(p.requires_grad or p.grad is not None for p in model.parameters())

    torch.save(model.state_dict(), tmp_path / "weights.pt")
    reloaded = build_model(model.cfg, seed=7, device="cpu")   # other weights until loaded
    ids = torch.tensor([get_tokenizer().encode("Every effort moves you")])
    assert not torch.equal(reloaded(ids), model(ids))
    reloaded.load_state_dict(torch.load(tmp_path / "weights.pt"))
    assert torch.equal(reloaded(ids), model(ids))

    # A model like any other: generation works, and later training leaves the copy alone.
    steps = list(generate_steps(model, ids[0].tolist(), 3))
    assert len(steps) == 3
    before = model(ids)
    job.advance(1)
    assert torch.equal(model(ids), before)
    assert not torch.equal(job.trained_model(1).model(ids), before)


# ---------------------------------------------------------------------------------------------
# Bad input gets a message, never a traceback
@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("   \n\t", "empty"), ("abc\x00def", "binary"),
    ("x" * 2_000_001, "at most"), (b"bytes", "must be a string")])
def test_bad_pasted_text_gets_a_clear_message(text, message):
    with pytest.raises(ValueError, match=message):
        corpus_from_text(text)


def test_bad_uploads_get_clear_messages(tmp_path):
    cases = {"picture.txt": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
             "latin1.txt": ("café".encode("latin-1") * 10, "not UTF-8"),
             "empty.txt": (b"", "empty"),
             "large.txt": (b"word " * 300_000, "at most"),
             "notes.pdf": (b"%PDF-1.4", ".txt")}
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=message):
            corpus_from_file(tmp_path / name)
    (tmp_path / "story.txt").write_text(STORY[:500], encoding="utf-8")
    assert corpus_from_file(tmp_path / "story.txt") == Corpus("story.txt", STORY[:500])


def test_a_text_too_short_for_one_window_gets_a_clear_message():
    with pytest.raises(ValueError, match="too short to train"):
        TrainingJob(SIDE_BY_SIDE, Corpus("short", STORY[:200]), TrainingSettings())
    # The training part is long enough, the validation part is not.
    with pytest.raises(ValueError, match="validation part"):
        check_training_text(STORY[:900], max_length=32, stride=32, batch_size=2)
    assert check_training_text(STORY[:2000], 32, 32, 2) == (6, 1)
    train, val = split_text(STORY[:2000])
    assert len(train) == 1800 and train + val == STORY[:2000]


@pytest.mark.parametrize("changes, message", [
    ({"steps": 0}, "steps must be at least 1"), ({"lr": -1.0}, "lr must be a positive"),
    ({"lr": float("nan")}, "lr must be"), ({"batch_size": 2.5}, "whole number"),
    ({"context_length": 1}, "at least 2"), ({"warmup_steps": -3}, "at least 0"),
    ({"start_context": " "}, "start context"), ({"sample_tokens": -1}, "at least 0")])
def test_bad_settings_get_clear_messages(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainingSettings(**changes)


def test_bad_variant_lists_get_clear_messages():
    with pytest.raises(ValueError, match="Unknown variant 'post-LM'"):
        make_variants(["post-LM"])
    with pytest.raises(ValueError, match="vocab_size 50257"):
        TrainingJob([Variant("small vocabulary", TINY.replace(vocab_size=1000))], short_corpus())
    for variants in ([], SIDE_BY_SIDE * 3):
        with pytest.raises(ValueError, match="one to 4 variants"):
            TrainingJob(variants, short_corpus())


def test_warm_up_raises_the_learning_rate_linearly():
    settings = TrainingSettings(lr=0.001, warmup_steps=4)
    assert [settings.lr_at(s) for s in range(6)] == [0.00025, 0.0005, 0.00075, 0.001, 0.001,
                                                      0.001]
    assert TrainingSettings().lr_at(0) == 0.0004


# ---------------------------------------------------------------------------------------------
# The server's limits
def test_the_job_limits_refuse_with_messages():
    settings = TrainingSettings(steps=1000, eval_freq=100)
    work = param_steps(SIDE_BY_SIDE, settings)
    with pytest.raises(ValueError, match="too large for this server"):
        TrainingLab(max_param_steps=work - 1).start("a", SIDE_BY_SIDE, short_corpus(), settings)
    with pytest.raises(ValueError, match="MB"):
        TrainingLab(budget_bytes=10 * 2 ** 20).start("a", SIDE_BY_SIDE, short_corpus(),
                                                     settings)

    lab = TrainingLab(max_jobs=1)
    first = lab.start("a", SIDE_BY_SIDE, short_corpus(), settings)
    another = replace(settings, seed=settings.seed + 1)      # another job
    try:
        with pytest.raises(ValueError, match="already training"):
            lab.start("a", SIDE_BY_SIDE, short_corpus(), another)
        assert lab.start("a", SIDE_BY_SIDE, short_corpus(), settings) is first   # the same
        with pytest.raises(ValueError, match="the most it runs at once"):
            lab.start("b", SIDE_BY_SIDE, short_corpus(), another)
        lab.stop("a")
        assert first.view().status == "stopped"
        second = lab.start("b", SIDE_BY_SIDE, short_corpus(), another)
        with pytest.raises(ValueError, match="Try Continue again"):
            lab.resume("a")
    finally:
        assert lab.cancel("a") and lab.cancel("b")
    assert first.view().status == second.view().status == "cancelled"
    assert lab.job("a") is None and len(lab) == 0 and not lab.cancel("a")
    with pytest.raises(ValueError, match="no training job"):
        lab.stop("a")


def test_a_variant_named_twice_is_refused():
    with pytest.raises(ValueError, match="'post-LN' is chosen 2 times"):
        make_variants(["post-LN", "post-LN"])


# ---------------------------------------------------------------------------------------------
# What a job holds once it has ended, and a diverged variant
def test_an_ended_job_frees_its_optimizer_and_gradients():
    settings = TrainingSettings(steps=2, eval_freq=1, eval_iter=1, sample_tokens=2)
    job = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).start()
    while job.view().step < 1 and job.running:
        threading.Event().wait(0.005)
    job.stop()
    assert job.view().status == "stopped" and job.view().step == 1
    assert all(r.optimizer is not None for r in job.runs)          # stopped: Continue works
    assert all(p.grad is None for r in job.runs for p in r.model.parameters())
    stopped = job.held_bytes()
    job.advance(1)
    assert job.view().status == "finished"
    assert all(r.optimizer is None for r in job.runs)
    weights = sum(4 * p.numel() for r in job.runs for p in r.model.parameters())
    assert job.held_bytes() == weights < stopped < job_bytes(SIDE_BY_SIDE, settings)


@pytest.mark.parametrize("room", ["for both", "for the new job only"])
def test_finished_jobs_never_block_another_sessions_job(room):
    """One session finished its job; another's identical job must start although the two would
    not both fit while training. A finished job holds its models' weights only; where even
    those leave too little room, it gives them up (its curves stay, Use says to train
    again)."""
    settings = TrainingSettings(steps=1, batch_size=8, context_length=64, eval_freq=1,
                                eval_iter=1, sample_tokens=2)
    need = job_bytes(SIDE_BY_SIDE, settings)
    weights = 4 * sum(count_parameters(v.config.replace(context_length=64)).total
                      for v in SIDE_BY_SIDE)
    lab = TrainingLab(budget_bytes=need + (2 * weights if room == "for both" else weights // 2))
    first = lab.start("a", SIDE_BY_SIDE, short_corpus(8000), settings)
    assert first.wait(120) and first.view().status == "finished"
    kept = first.view()
    another = replace(settings, seed=settings.seed + 1)                   # another job
    second = lab.start("b", SIDE_BY_SIDE, short_corpus(8000), another)    # no refusal
    try:
        assert second.wait(120) and second.view().status == "finished"
        assert first.view().runs[0].train_losses == kept.runs[0].train_losses   # curves stay
        if room == "for both":
            assert first.trained_model(0).steps == 1
        else:
            with pytest.raises(ValueError, match="let go to make room"):
                first.trained_model(0)
        assert second.trained_model(0).steps == 1
    finally:
        lab.cancel("a")
        lab.cancel("b")


def test_a_stopped_job_keeps_what_continue_needs_and_counts_it():
    settings = TrainingSettings(steps=3, batch_size=8, context_length=64, eval_freq=1,
                                eval_iter=1, sample_tokens=2)
    need = job_bytes(SIDE_BY_SIDE, settings)
    weights = 4 * sum(count_parameters(v.config.replace(context_length=64)).total
                      for v in SIDE_BY_SIDE)
    lab = TrainingLab(budget_bytes=need + weights)
    first = lab.start("a", SIDE_BY_SIDE, short_corpus(8000), settings, run=False)
    first.advance(1)
    assert first.view().status == "stopped"
    try:
        assert first.held_bytes() > weights            # AdamW's moments, for Continue
        another = replace(settings, seed=settings.seed + 1)
        with pytest.raises(ValueError, match="training memory free"):
            lab.start("b", SIDE_BY_SIDE, short_corpus(8000), another)
        first.advance(2)
        assert first.view().status == "finished" and first.held_bytes() == weights
        lab.start("b", SIDE_BY_SIDE, short_corpus(8000), another, run=False)
    finally:
        lab.cancel("a")
        lab.cancel("b")


def test_a_diverged_variant_cannot_be_used():
    settings = TrainingSettings(steps=3, lr=1e3, eval_freq=1, eval_iter=1, sample_tokens=2)
    job = TrainingJob(SIDE_BY_SIDE, short_corpus(), settings).advance(3)
    diverged = [i for i, r in enumerate(job.view().runs) if r.diverged]
    assert diverged, "lr 1e3 should make a variant diverge"
    with pytest.raises(ValueError, match="diverged at step"):
        job.trained_model(diverged[0])
