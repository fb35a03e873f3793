"""The Train tab's figures for the copying task (issue 34, part 2): the loss on each half per
variant, and the best head scores over the steps, from the view's plain lists; a text's job
keeps the book's figures."""
import json

from explorer.app.plots.training import grad_norm_figure, is_copying, loss_figure
from explorer.runtime.training.views import JobView, RunView


def run(label, copying=True):
    evals = [0, 10, 20]
    extra = dict(first_half_loss=[6.9, 6.3, 6.2], repeated_half_loss=[6.9, 4.0, 0.4],
                 best_prev_token=[0.1, 0.4, 0.8], best_induction=[0.05, 0.2, 0.7]) \
        if copying else {}
    return RunView(label=label, config={}, parameters=1, tokens_seen=0, train_loss_now=1.0,
                   val_loss_now=1.0, seconds_per_step=0.1, diverged=False, diverged_at=None,
                   note="", eval_steps=evals, eval_tokens=[0, 0, 0],
                   train_losses=[7.0, 5.0, 3.0], val_losses=[7.0, 5.2, 3.3],
                   grad_steps=[0, 1], grad_norms=[[1.0], [2.0]], sample="", sample_step=None,
                   **extra)


def view(copying=True):
    return JobView(status="running", message="", step=21, total_steps=100, tokens_seen=0,
                   total_tokens=0, epoch=0, batches_per_epoch=1, corpus="copying",
                   seconds=1.0, runs=[run("1 block", copying), run("2 blocks", copying)])


def lines(figure):
    return [(t.name, t.line.dash, list(t.y)) for t in figure.data if t.type == "scatter"]


def test_the_copying_task_shows_each_half_per_variant():
    got = lines(loss_figure(view()))
    assert [(name, dash) for name, dash, _ in got] == [
        ("1 block", "solid"), ("1 block", "dot"), ("2 blocks", "solid"), ("2 blocks", "dot")]
    assert got[0][2] == [6.9, 4.0, 0.4] and got[1][2] == [6.9, 6.3, 6.2]


def test_the_copying_task_shows_the_best_head_scores_on_a_0_to_1_scale():
    figure = grad_norm_figure(view())
    got = lines(figure)
    assert [(name, dash) for name, dash, _ in got][:2] == [("1 block", "solid"),
                                                          ("1 block", "dash")]
    assert got[0][2] == [0.05, 0.2, 0.7] and got[1][2] == [0.1, 0.4, 0.8]
    assert list(figure.layout.yaxis.range) == [0, 1.02]
    assert any(shape.y0 == 0.5 for shape in figure.layout.shapes)     # the line of a job


def test_a_text_job_keeps_the_books_figures():
    plain = view(copying=False)
    assert not is_copying(plain)
    assert [t.line.dash for t in loss_figure(plain).data][:2] == ["solid", "dash"]
    assert {t.type for t in grad_norm_figure(plain).data} == {"heatmap"}
    json.dumps(loss_figure(view()).to_plotly_json(), default=str)   # serialisable
