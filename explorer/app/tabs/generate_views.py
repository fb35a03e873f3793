"""What the Generate tab shows of the session's generation (``session.Generation``): its text,
bars, speed line and step table, drawn from plain data (a toggle draws them again)."""
from __future__ import annotations

import gradio as gr

from ... import native
from ...book.tokenizer import get_tokenizer
from ...probes.compare import first_parting, parted, parted_runs
from .. import comparison
from ..i18n import say, t
from ..plots.generation import next_token_bars_html, parted_texts_html, steps_table_html
from ..plots.labels import visible_token
from ...probes.compare import NAMES

HEADERS = {1: (("gen.step", "step"), ("gen.token", "token"), ("gen.probability", "probability"),
               ("gen.rank", "rank"), ("gen.entropy", "entropy (bits)"), ("gen.ms", "ms")),
           2: (("gen.step", "step"), ("gen.token_a", "A: token"),
               ("gen.probability_a", "A: probability"), ("gen.token_b", "B: token"),
               ("gen.probability_b", "B: probability"), ("gen.part", "part"))}

def row(index, steps):
    if len(steps) == 1:
        s = steps[0]
        return [index + 1, visible_token(s.text, 24), f"{100 * s.prob:.3g} %", s.rank,
                f"{s.entropy_bits:.2f}", f"{s.seconds * 1000:.1f}"]
    cells = [[visible_token(s.text, 16), f"{100 * s.prob:.3g} %"] if s is not None
             else ["", ""] for s in steps]
    differ = any(s is None for s in steps) or steps[0].token_id != steps[1].token_id
    return [index + 1, *cells[0], *cells[1], "≠" if differ else ""]


def decode(ids):
    tokenizer = get_tokenizer()
    return tokenizer.decode([i for i in ids if i < tokenizer.n_vocab])


def bars(step, name=None, new=(), flags=(), stopped=False) -> dict:
    """What one model's bars show, as plain data."""
    chosen = step.top_ids.index(step.token_id) if step.token_id in step.top_ids else None
    side = dict(texts=list(step.top_texts), probs=[float(p) for p in step.top_probs],
                chosen=chosen)
    if name is not None:
        tokenizer = get_tokenizer()
        tail = new[-4:]
        side.update(name=name, tail=[(tokenizer.token_text(i) if i < tokenizer.n_vocab
                                      else f"<id {i}>", flag)
                                     for i, flag in zip(tail, flags[len(new) - len(tail):])],
                    note=t("gen.stopped_eot", "stopped at <|endoftext|>") if stopped else "")
    return side


def speed_text(speed) -> str:
    stopped = t("gen.stopped", " · <b>stopped</b>") if speed.get("stopped") else ""
    return _speed_text(speed) + stopped


def _speed_text(speed) -> str:
    path = say(speed["path"])
    for note in speed.get("where", ()):
        path += " · " + say(note)
    if speed.get("shared"):
        path += t("gen.shared", " · from the shared cache: decoded once for every session "
                                "that asks")
    if len(speed["contexts"]) == 1:
        text = t("gen.speed", "{n} tokens · <b>{rate:.1f} tokens/s</b> · {path}", n=speed["n"],
                 rate=speed["rate"], path=path)
        if not speed["cached"][0]:
            text += t("gen.window_full", " · window full: recomputing the last context_length "
                                         "tokens")
        return text
    text = t("gen.speed_pair", "{n} steps of A and B · <b>{rate:.1f} steps/s</b> (a step: one "
                               "token of each) · {path}", n=speed["n"], rate=speed["rate"],
             path=path)
    for name, cached in zip(NAMES, speed["cached"]):
        if not cached:
            text += t("gen.window_full_of", " · {name}'s window is full: it recomputes its last "
                                            "context_length tokens", name=name)
    if speed["contexts"][0] != speed["contexts"][1]:
        text += t("gen.contexts", " · context: A {a:,} tokens, B {b:,}", a=speed["contexts"][0],
                  b=speed["contexts"][1])
    if speed["vocabs"][0] != speed["vocabs"][1]:
        text += t("gen.vocabs", " · vocabularies of {a:,} and {b:,} entries: the bars compare "
                                "token texts", a=speed["vocabs"][0], b=speed["vocabs"][1])
    return text


def history_html(session, live=False) -> str:
    """The step table; with two models, both texts over it, where they part marked."""
    gen = session.generation
    rows = gen.rows if gen else []
    width = 2 if gen and len(gen.ids) == 2 else 1
    table = steps_table_html([t(*h) for h in HEADERS[width]], rows,
                             caption=t("gen.steps_pair", "Steps of A and B (newest first)")
                             if width == 2 else t("gen.steps", "Steps (newest first)"),
                             live=live)
    if width == 1:
        return table
    new = [ids[gen.start:] for ids in gen.ids]
    flags = parted(*new)
    runs = [parted_runs(ids, flags[:len(ids)], decode) for ids in new]
    return parted_texts_html(gen.prompt, runs, comparison.names(session),
                             first_parting(*new)) + table


def bars_hint() -> str:
    return ('<section class="nt-bars"><h4>' + t("gen.bars_title", "Next-token candidates")
            + '</h4><p class="hint">' + t("gen.bars_hint", "Press <b>Generate</b> or <b>Next "
                                                         "token</b>: the model's top 10 "
                                                         "candidates for the next token appear "
                                                         "here, as bars on a 0–100 % scale.")
            + "</p></section>")


def _step(tag, run, step, html) -> str:
    return f'<{tag} class="nt-step" data-run="{run}" data-step="{step}">{html}</{tag}>'


def logged(gen, fresh=False):
    """This step's bars and speed line after the update's others (``fresh``: its first)."""
    n = gen.speed["n"]
    bars, speed = ((), ()) if fresh else gen.log
    gen.log = ([*bars, _step("div", gen.run, n, next_token_bars_html(gen.bars))],
               [*speed, _step("span", gen.run, n, speed_text(gen.speed))])


def shown(session, live=False, table=True) -> dict:
    gen = session.generation
    if gen is None:
        return {"gen_output": "", "bars": bars_hint(), "history": history_html(session),
                "speed": ""}
    bars, speed = (("".join(gen.log[0]), "".join(gen.log[1])) if gen.log[0] else
                   (next_token_bars_html(gen.bars), speed_text(gen.speed)))
    return {"gen_output": gen.text, "bars": bars,
            "history": history_html(session, live) if table else gr.skip(), "speed": speed}


def record(gen, steps, models, rate, new, shared=False, where=()):
    """The latest step of every model into ``gen`` (``rate``: steps a second so far;
    ``shared``: from the shared cache; ``where``: where they were decoded)."""
    n = max(len(x) for x in new)
    flags = parted(*new) if len(new) == 2 else []
    names = NAMES if len(new) == 2 else (None,)
    for side, step in enumerate(steps):
        if step is not None:
            gen.bars[side] = bars(step, names[side], new[side], flags,
                                   stopped=len(new[side]) < n)
    last = [s for s in steps if s is not None][0]
    gen.speed = dict(n=n, rate=rate, path=native.decoding_label(last.fast_step),
                     cached=[bool(s.cached) if s is not None else True for s in steps],
                     contexts=[m.cfg.context_length for m in models],
                     vocabs=[m.cfg.vocab_size for m in models], shared=shared,
                     where=list(where))
    gen.text = gen.prompt + decode(new[0])
