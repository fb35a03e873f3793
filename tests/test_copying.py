"""The copying task (issue 34, part 2): its data is what it says, its half losses are the losses
they claim, a job records them with the head scores at each evaluation, and the Train tab's
data choice trains it through /train_start."""
import json
import math
from dataclasses import replace

import pytest
import torch
from local_client import local_client

from explorer.app import shared
from explorer.app.tabs import train as train_tab
from explorer.book.copying import (IGNORE_INDEX, CopyingDataset, copying_sequences,
                                   half_losses, half_masks)
from explorer.book.errors import ExplorerError
from explorer.book.tokenizer import get_tokenizer
from explorer.book.training import calc_loss_batch
from explorer.runtime.training.copying_task import (COPYING_MODEL, COPYING_VARIANTS, PROMPT_WORDS,
                                                    CopyingTask, copying_settings, repeated_text)
from explorer.runtime.training.job import TrainingJob
from explorer.runtime.training.lab import TrainingLab
from explorer.runtime.training.run import first_batches, mean_loss
from explorer.runtime.training.setup import Variant, make_variants


def test_each_sequence_is_distinct_words_then_their_repetition_of_varying_length():
    sequences = copying_sequences(500, n_words=32, min_len=2, max_len=8, length=19, seed=3)
    lengths, starts = set(), set()
    for seq in sequences:
        assert len(seq) <= 19 and all(0 <= i < 32 for i in seq)
        # the words occurring twice are the repeated ones: the last L words repeat the L before
        twice = [i for i in set(seq) if seq.count(i) == 2]
        n = len(twice)
        assert 2 <= n <= 8 and all(seq.count(i) <= 2 for i in seq)
        assert seq[-n:] == seq[-2 * n:-n]
        assert len(set(seq[:-n])) == len(seq) - n           # distinct before the repetition
        lengths.add(n)
        starts.add(len(seq) - 2 * n)                        # words before the sequence
    assert lengths == set(range(2, 9))                      # every length, not one
    assert starts == set(range(0, 19 - 2 * 2 + 1))          # it starts anywhere it fits


def test_the_same_seed_gives_the_same_sequences_and_another_seed_others():
    a = copying_sequences(50, 32, 2, 8, 19, seed=1)
    assert a == copying_sequences(50, 32, 2, 8, 19, seed=1)
    assert a != copying_sequences(50, 32, 2, 8, 19, seed=2)


def test_a_sequence_longer_than_its_window_is_refused():
    with pytest.raises(ExplorerError, match="max_len 10, length 19"):
        copying_sequences(1, 32, 2, 10, 19, seed=0)


def test_the_dataset_shifts_by_one_and_pads_with_ignored_targets():
    data = CopyingDataset([[7, 1, 2, 1, 2]], max_length=6)
    x, y = data[0]
    assert x.tolist() == [7, 1, 2, 1, 0, 0]
    assert y.tolist() == [1, 2, 1, 2, IGNORE_INDEX, IGNORE_INDEX]


def test_half_losses_are_the_mean_losses_of_their_positions_on_a_hand_made_batch():
    # prefix 9, words 3 4 5, then 3 4 5 again; and words 6 7, then 6 7 (padded)
    x, y = zip(*CopyingDataset([[9, 3, 4, 5, 3, 4, 5], [6, 7, 6, 7]], max_length=6))
    inputs, targets = torch.stack(x), torch.stack(y)
    first, repeated = half_masks(inputs, targets)
    assert first.tolist() == [[True, True, True, True, False, False],
                              [True, True, False, False, False, False]]
    assert repeated.tolist() == [[False, False, False, False, True, True],
                                 [False, False, True, False, False, False]]
    logits = torch.randn(2, 6, 10, generator=torch.Generator().manual_seed(0))
    each = -torch.log_softmax(logits, -1)
    loss = [[each[b, t, targets[b, t]].item() if targets[b, t] >= 0 else None for t in range(6)]
            for b in range(2)]
    by_hand_first = [loss[0][0], loss[0][1], loss[0][2], loss[0][3], loss[1][0], loss[1][1]]
    by_hand_repeated = [loss[0][4], loss[0][5], loss[1][2]]
    got_first, got_repeated = half_losses(logits, inputs, targets)
    assert got_first == pytest.approx(sum(by_hand_first) / 6, abs=1e-6)
    assert got_repeated == pytest.approx(sum(by_hand_repeated) / 3, abs=1e-6)


def test_the_labs_mean_loss_counts_no_padded_target_as_the_books_loss_does():
    task = CopyingTask(train_sequences=64, val_sequences=16)
    _, val = task.loaders(window=18, batch_size=8)
    batches = first_batches(val, 2)
    model = make_model()
    with torch.no_grad():
        book = sum(calc_loss_batch(x, y, model, "cpu").item() for x, y in batches) / 2
        assert mean_loss(batches, model, "cpu") == pytest.approx(book, abs=1e-5)


def make_model(n_layers=2):
    from explorer.book.model import GPTModel
    torch.manual_seed(0)
    return GPTModel(COPYING_MODEL.replace(n_layers=n_layers)).eval()


def small_job(steps=4):
    task = CopyingTask(train_sequences=256, val_sequences=32)
    settings = copying_settings(steps=steps, batch_size=8, eval_freq=2, eval_iter=2)
    return TrainingJob(make_variants(COPYING_VARIANTS, COPYING_MODEL), task, settings)


def test_a_copying_job_records_both_half_losses_and_the_best_head_scores_at_each_evaluation():
    job = small_job().advance(4)
    view = job.view()
    assert "vocab_size 32" in view.caption and "context 18" in view.caption
    for index, run in enumerate(view.runs):
        n = len(run.eval_steps)
        assert run.eval_steps == [0, 2, 3]
        assert len(run.first_half_loss) == len(run.repeated_half_loss) == n
        assert len(run.best_prev_token) == len(run.best_induction) == n
        assert all(0 <= s <= 1 for s in run.best_prev_token + run.best_induction)
        assert all(abs(v - math.log(32)) < 1 for v in run.first_half_loss)   # near chance
        # the last record is the losses of the model as it ended, on the validation batches
        model = job.trained_model(index).model
        x, y = zip(*first_batches(job.val_loader, 2))
        inputs, targets = torch.cat(x), torch.cat(y)
        with torch.no_grad():
            first, repeated = half_losses(model(inputs), inputs, targets)
        assert run.first_half_loss[-1] == pytest.approx(first, abs=1e-5)
        assert run.repeated_half_loss[-1] == pytest.approx(repeated, abs=1e-5)
    assert view.runs[0].sample and " | " in view.runs[0].sample


def test_a_text_job_records_no_copying_measurements():
    from explorer.runtime.training.setup import default_corpus, default_settings
    job = TrainingJob(make_variants(["pre-LN (book)"], "teach-tiny"), default_corpus(),
                      default_settings(steps=1, context_length=16, batch_size=2)).advance(1)
    run = job.view().runs[0]
    assert run.eval_steps == [0] and run.first_half_loss == run.best_induction == []
    assert job.view().caption == ""


def test_a_variant_whose_vocabulary_cannot_read_the_tasks_words_is_refused():
    narrow = Variant("narrow", COPYING_MODEL.replace(vocab_size=16))
    with pytest.raises(ExplorerError, match="vocab_size 32"):
        TrainingJob([narrow], CopyingTask(train_sequences=64, val_sequences=8),
                    copying_settings(steps=1, batch_size=8))


def test_choosing_the_copying_task_brings_its_own_comparison_and_settings():
    chosen = train_tab.data_chosen(train_tab.COPYING, ["pre-LN (book)", "post-LN"])
    assert chosen["train_variants"] == list(COPYING_VARIANTS)
    assert chosen["train_context"] == copying_settings().context_length
    back = train_tab.data_chosen("the default story", list(COPYING_VARIANTS))
    assert back["train_variants"] != list(COPYING_VARIANTS)
    assert set(train_tab.data_chosen("pasted text", ["pre-LN (book)", "post-LN"])) == {
        "train_preset"}


def test_the_copying_task_hides_the_model_it_does_not_use():
    """Issue 47, item 18: "model: teach-deep" stayed shown, though the task trains its own."""
    assert train_tab.data_chosen(train_tab.COPYING, [])["train_preset"]["visible"] is False
    assert train_tab.data_chosen("the default story", list(COPYING_VARIANTS))[
        "train_preset"]["visible"] is True


def test_the_variant_to_use_is_the_one_with_the_induction_head():
    """Issue 47, item 18: "trained variant" defaulted to "1 block", which cannot form one."""
    from explorer.app.tabs.train_live import choice_of
    from explorer.runtime.training.copying_task import induction_variant
    job = small_job().advance(4)
    view = job.view()
    runs = [replace(view.runs[0], best_induction=[0.1, 0.12]),
            replace(view.runs[1], best_induction=[0.1, 0.81])]
    assert induction_variant(runs) == 1
    assert choice_of(replace(view, runs=runs))["value"] == "2 blocks"
    from explorer.runtime.training.setup import default_corpus, default_settings
    plain = TrainingJob(make_variants(["pre-LN (book)", "post-LN"], "teach-tiny"),
                        default_corpus(), default_settings(steps=1, context_length=16,
                                                           batch_size=2))
    assert induction_variant(plain.view().runs) == 0          # any other job: the first


def test_the_copying_table_says_what_its_losses_are():
    """Issue 47, item 17: "val loss 2.474" read against curves at 0.055 (repeated half) and
    3.48 (first half): it is the loss over every position, both halves."""
    from explorer.app.plots.training import table_rows
    view = small_job().advance(4).view()
    table = table_rows(view)
    assert table["headers"][4:7] == ["val loss, both halves", "val loss, first half",
                                     "val loss, repeated half"]
    for run, row in zip(view.runs, table["data"]):
        both, first, repeated = (float(v) for v in row[4:7])
        assert (first, repeated) == (round(run.first_half_loss[-1], 3),
                                     round(run.repeated_half_loss[-1], 3))
        assert min(first, repeated) <= both <= max(first, repeated)    # their weighted mean


def test_evaluation_batches_are_used_up_to_the_validation_sets_batches():
    """Issue 47, item 17: "Evaluation batches" 4 -> 5 changed nothing visible: the task has 128
    validation sequences, 4 batches of 32, and each evaluation measures at most those. Fewer
    batches measure fewer, and the page says which."""
    task = CopyingTask(train_sequences=256, val_sequences=32)            # 4 batches of 8

    def first_eval(eval_iter):
        settings = copying_settings(steps=1, batch_size=8, eval_freq=1, eval_iter=eval_iter)
        job = TrainingJob(make_variants(COPYING_VARIANTS, COPYING_MODEL), task, settings)
        return job, job.advance(1).view().runs[1].first_half_loss[0]
    (one, at_1), (_, at_2), (four, at_4), (five, at_5) = map(first_eval, (1, 2, 4, 5))
    assert at_1 != at_2 and at_4 == at_5
    assert ("measures 8 of the 32 validation sequences (evaluation batches 1 × batch size 8)"
            in str(one.caption))
    for job in (four, five):
        assert ("measures all 32 validation sequences (4 batches of 8): evaluation batches "
                "beyond 4 change nothing") in str(job.caption)


def test_the_copying_task_trains_through_train_start(app_url, monkeypatch):
    lab = TrainingLab(max_jobs=1)
    monkeypatch.setattr(shared, "LAB", lab)
    c = local_client(app_url)
    progress, *_ = c.predict(data=train_tab.COPYING, text="", upload=None,
                             variants=list(COPYING_VARIANTS), preset="teach-tiny", steps=3,
                             batch_size=8, context_length=18, lr=0.003, warmup_steps=0,
                             eval_freq=1, eval_iter=1, api_name="/train_start")
    assert "the copying task" in progress and "Finished" in progress
    job = lab.job(c.session_hash)
    view = job.view()
    assert [r.label for r in view.runs] == list(COPYING_VARIANTS)
    assert [r.config["n_layers"] for r in view.runs] == [1, 2]
    assert all(r.config["vocab_size"] == 32 for r in view.runs)
    assert all(len(r.repeated_half_loss) == 3 for r in view.runs)
    assert "vocab_size 32" in progress                 # the page says what the task is
    # Use this model: the prompts of tabs 2, 5 and 7 become the task's words, repeated, which
    # the trained model reads (the default prompt's ids are beyond its 32)
    used = c.predict("2 blocks", api_name="/train_use")
    text = repeated_text(CopyingTask())
    assert used[-3:] == (text, text, text)
    traced = c.predict(text, api_name="/trace")
    assert "Every effort" not in json.dumps(traced[-1], default=str)
    for session in list(lab._members):
        lab.cancel(session)


def test_the_repeated_prompt_reads_back_as_the_tasks_words_twice():
    task = CopyingTask()
    text = repeated_text(task)
    ids = get_tokenizer().encode(text)
    n = len(ids) // 2
    assert ids[:n] == ids[n:] and len(set(ids[:n])) == n == PROMPT_WORDS
    assert all(0 <= i < task.n_words for i in ids)
    assert repeated_text(task) == text                     # fixed by the task's seed
    assert 2 * n <= copying_settings().context_length
