"""Interventions at inference on a shared model (``explorer.probes.intervening``): each kind
against a hand-written forward hook on a private copy of the book's GPTModel, on every norm
placement, RoPE, no shortcut and ReLU; nothing changes, to the bit, without one; another thread
running the same model sees nothing; generation with the KV cache equals recomputing; the
string form, the messages and the checks against a config."""
import re
import threading

import numpy as np
import pytest
import torch

from explorer import native
from explorer.book.config import GPTConfig
from explorer.book.errors import ExplorerError
from explorer.book.generate import generate_steps
from explorer.book.model import GPTModel
from explorer.book.probe_points import editing, recording
from explorer.probes import trace
from explorer.probes.intervening import Editor, intervened_steps, intervening
from explorer.probes import interventions as interventions_module
from explorer.probes.interventions import (KINDS, MAX_INTERVENTION_CHARS, MAX_INTERVENTIONS,
                                           MAX_NUMBER_DIGITS, Intervention, Interventions)
from explorer.runtime.build import build_model

from intervention_hooks import hooked_copy, running_mean_by_loop, with_random_norms

CFG = GPTConfig(vocab_size=97, context_length=24, emb_dim=16, n_heads=4, n_layers=3,
                drop_rate=0.0)
VARIANTS = {"pre-LN": CFG, "post-LN": CFG.replace(norm_placement="post"),
            "no norm": CFG.replace(norm_placement="none"), "rope": CFG.replace(pos_encoding="rope"),
            "no shortcut": CFG.replace(shortcut=False), "relu": CFG.replace(activation="relu")}
SPECS = [
    "zero trf_blocks[1].att head 2", "zero trf_blocks[*].att heads 0,3",
    "mean trf_blocks[1].att heads 1,2", "zero trf_blocks[0].att", "zero trf_blocks[2].ff",
    "identity trf_blocks[1].norm1", "identity trf_blocks[0].norm2",
    "freeze trf_blocks[1].norm1", "freeze trf_blocks[2].norm2", "identity trf_blocks[*].norm1",
    "remove trf_blocks[1].shortcut", "remove trf_blocks[0].att.shortcut",
    "remove trf_blocks[2].ff.shortcut", "relu trf_blocks[1].ff", "relu trf_blocks[*].ff",
    "zero pos_emb", "identity final_norm", "freeze final_norm",
    "zero trf_blocks[1].att head 2; mean trf_blocks[2].att head 0; freeze trf_blocks[1].norm2; "
    "remove trf_blocks[2].att.shortcut; relu trf_blocks[0].ff; identity final_norm",
]
IDS = torch.randint(0, CFG.vocab_size, (2, 11), generator=torch.Generator().manual_seed(5))
# Patches take their values from a run of other ids: as long as IDS, or shorter (the
# positions it lacks keep their own)
CLEAN = ",".join(map(str, torch.randint(0, CFG.vocab_size, (11,),
                                        generator=torch.Generator().manual_seed(6)).tolist()))
SPECS += [f"patch trf_blocks[1].att head 2 from {CLEAN}",
          f"patch trf_blocks[2].att heads 0,3 at 7 from {CLEAN}",
          f"patch trf_blocks[0].att from {CLEAN}", f"patch trf_blocks[*].ff at 4 from {CLEAN}",
          f"patch trf_blocks[1].resid_pre from {CLEAN[:CLEAN.rindex(',')]}",
          f"patch trf_blocks[2].resid_pre at 10 from {CLEAN}; zero trf_blocks[0].att head 1"]


def book_model(cfg, seed=3):
    torch.manual_seed(seed)
    return with_random_norms(GPTModel(cfg).eval(), seed)


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request):
    return request.param, book_model(VARIANTS[request.param])


def applies(spec, cfg):
    try:
        Interventions.parse(spec).check(cfg)
    except ExplorerError:
        return False
    return True


@pytest.mark.parametrize("spec", SPECS)
def test_each_intervention_equals_a_hand_written_hook(variant, spec):
    name, model = variant
    if not applies(spec, model.cfg):
        with pytest.raises(ExplorerError), intervening(model, spec):
            pass
        return
    with torch.no_grad():
        clean = model(IDS)
        with intervening(model, spec):
            ours = model(IDS)
        expected = hooked_copy(model, spec)(IDS)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    assert (ours - clean).abs().max() > 1e-3, "the intervention changed nothing"
    assert torch.equal(model(IDS), clean)          # and the model is as it was


def test_every_kind_is_covered_by_the_hooks():
    assert {item.kind for spec in SPECS for item in Interventions.parse(spec)} == \
        {k.kind for k in KINDS}


def test_a_fused_model_intervened_matches_the_book_model_and_keeps_what_it_leaves_alone():
    fused = build_model(CFG, seed=3, device="cpu")
    book = book_model(CFG)
    fused.load_state_dict(book.state_dict())
    spec = "zero trf_blocks[2].att heads 1,2; freeze trf_blocks[2].norm2"
    with torch.inference_mode():
        with intervening(fused, spec):
            ours = fused(IDS)
        torch.testing.assert_close(ours, hooked_copy(book, spec)(IDS), rtol=1e-5, atol=1e-5)
    ids = IDS[0].tolist()
    clean = trace(fused, ids, keep_logits=True)
    with intervening(fused, spec):
        changed = trace(fused, ids, keep_logits=True)
    for point, stats in clean.points.items():        # blocks 0 and 1: the very same numbers
        assert np.array_equal(stats.overall["mean"][:2], changed.points[point].overall["mean"][:2])
    assert np.array_equal(clean.attention[2], changed.attention[2])   # computed before the edit
    assert not np.allclose(clean.logits, changed.logits, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# Nothing changes without an intervention, to the bit
@pytest.fixture(scope="module")
def app_model():
    """As the app builds it: fused, eval."""
    return with_random_norms(build_model(CFG, seed=4, device="cpu"))


def generated(model, ids, **kwargs):
    steps = generate_steps(model, ids, 30, **kwargs)          # past the context: it slides
    return [(s.token_id, s.top_probs, s.fast_step) for s in steps]


def c_step():
    return {"step": native.model_step, "summarize": native.next_token_summary}


def test_no_intervention_changes_nothing_to_the_bit(app_model):
    ids = IDS[0].tolist()
    with torch.inference_mode():
        clean = app_model(IDS)
    clean_trace = trace(app_model, ids, keep_logits=True, lens="all")
    clean_tokens = generated(app_model, ids, **c_step())
    for nothing in ("", None, Interventions(), []):
        with intervening(app_model, nothing) as editor, torch.inference_mode():
            assert editor is None
            assert torch.equal(app_model(IDS), clean)
        with intervening(app_model, nothing):
            again = trace(app_model, ids, keep_logits=True, lens="all")
            assert generated(app_model, ids, **c_step()) == clean_tokens
        assert np.array_equal(again.logits, clean_trace.logits)
        assert np.array_equal(again.lens_probs, clean_trace.lens_probs)
        steps = intervened_steps(app_model, nothing,
                                 generate_steps(app_model, ids, 30, **c_step()))
        assert [(s.token_id, s.top_probs, s.fast_step) for s in steps] == clean_tokens
    if native.available():
        assert all(fast for _, _, fast in clean_tokens[1:10])   # the C step ran (till it slid)


def test_an_active_editor_that_edits_nothing_changes_nothing_to_the_bit(app_model):
    ids = IDS[0].tolist()
    with torch.inference_mode():
        clean = app_model(IDS)
    clean_trace = trace(app_model, ids, keep_logits=True, lens="all")
    pytorch_tokens = generated(app_model, ids)
    c_summary = generated(app_model, ids, summarize=native.next_token_summary)
    with editing(Editor(app_model, Interventions())), torch.inference_mode():
        assert torch.equal(app_model(IDS), clean)
    with editing(Editor(app_model, Interventions())):
        again = trace(app_model, ids, keep_logits=True, lens="all")
        assert generated(app_model, ids) == pytorch_tokens
        # The C step has no probe points: it steps aside, and PyTorch's numbers come out.
        assert generated(app_model, ids, **c_step()) == c_summary
    assert np.array_equal(again.logits, clean_trace.logits)
    for point, stats in clean_trace.points.items():
        assert np.array_equal(stats.per_token["std"], again.points[point].per_token["std"])


def test_another_thread_running_the_same_model_sees_no_intervention(app_model):
    spec = "zero trf_blocks[*].att heads 0,1,2,3; identity final_norm"
    with torch.inference_mode():
        clean = app_model(IDS)
        with intervening(app_model, spec):
            changed = app_model(IDS)
    assert not torch.allclose(clean, changed)
    start = threading.Barrier(2)
    seen = {"with": [], "without": []}

    def run(which):
        start.wait()
        for _ in range(40):
            with torch.inference_mode():
                if which == "with":
                    with intervening(app_model, spec):
                        seen[which].append(app_model(IDS))
                else:
                    seen[which].append(app_model(IDS))
    threads = [threading.Thread(target=run, args=(w,)) for w in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(x, clean) for x in seen["without"])
    assert all(torch.equal(x, changed) for x in seen["with"])


# ---------------------------------------------------------------------------------------------
# Generation
@pytest.mark.parametrize("spec", [
    "mean trf_blocks[1].att heads 0,2; freeze trf_blocks[0].norm1; freeze final_norm",
    "zero trf_blocks[2].att head 1; remove trf_blocks[1].shortcut; relu trf_blocks[*].ff",
])
def test_generation_with_the_kv_cache_under_an_intervention_equals_recomputing(app_model, spec):
    ids = IDS[0, :6].tolist()
    cached = list(intervened_steps(app_model, spec, generate_steps(app_model, ids, 30,
                                                                    **c_step())))
    with intervening(app_model, spec):
        recomputed = list(generate_steps(app_model, ids, 30, use_cache=False))
    assert [s.token_id for s in cached] == [s.token_id for s in recomputed]
    assert not any(s.fast_step for s in cached)
    np.testing.assert_allclose([s.top_probs for s in cached], [s.top_probs for s in recomputed],
                               rtol=1e-5, atol=1e-6)
    assert any(s.cached for s in cached) and not cached[-1].cached   # the window slid
    # And the book's greedy loop on the hooked copy picks the same tokens.
    book = book_model(CFG, seed=0)
    book.load_state_dict(app_model.state_dict())
    hooked, context = hooked_copy(book, spec), list(ids)
    with torch.no_grad():
        for _ in range(30):
            context.append(int(hooked(torch.tensor([context[-CFG.context_length:]]))[0, -1]
                               .argmax()))
    assert context[len(ids):] == [s.token_id for s in cached]
    clean = [s.token_id for s in generate_steps(app_model, ids, 30)]
    assert clean != context[len(ids):]


def test_the_running_mean_continues_over_the_kv_cache():
    model = book_model(CFG)
    editor = Editor(model, Interventions.parse("mean trf_blocks[0].att head 1"))
    values = torch.randn(2, 9, 3)
    editor._begin(0)
    first = editor._running_mean(("k",), values[:, :5])
    editor._begin(5)
    rest = editor._running_mean(("k",), values[:, 5:])
    torch.testing.assert_close(torch.cat([first, rest], 1), running_mean_by_loop(values))
    editor._begin(3)            # not where the kept sums end: a bug, said at once
    with pytest.raises(RuntimeError, match="starts at 3"):
        editor._running_mean(("k",), values[:, :1])


# ---------------------------------------------------------------------------------------------
# The trace
@torch.no_grad()
def test_a_trace_under_an_intervention_records_what_the_model_goes_on_with(app_model):
    book = book_model(CFG, seed=0)
    book.load_state_dict(app_model.state_dict())
    ids = IDS[0].tolist()
    for spec in ("identity final_norm; zero trf_blocks[1].ff", "freeze final_norm"):
        with intervening(app_model, spec):
            traced = trace(app_model, ids, keep_logits=True, lens="all")
        hooked = hooked_copy(book, spec)
        streams = []
        with recording(_Outputs(streams)):
            expected = hooked(torch.tensor([ids]))[0]
        np.testing.assert_allclose(traced.logits, expected.numpy(), rtol=1e-5, atol=1e-5)
        # The lens: the final norm as intervened on each block's output.
        final_norm_in = streams[-1]
        for layer, stream in enumerate(streams[:-1]):
            if spec.startswith("identity"):
                normed = stream
            else:
                normed = _frozen_like(book.final_norm, stream, final_norm_in)
            probs = torch.softmax(book.out_head(normed), -1)
            np.testing.assert_allclose(traced.lens_probs[layer], probs.max(-1).values.numpy(),
                                       rtol=1e-4, atol=1e-6)


class _Outputs:
    def __init__(self, streams):
        self.streams = streams

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "resid_post":
            self.streams.append(x[0])


def _frozen_like(norm, rows, source):
    """The final norm frozen with the constants of ``source`` (its real input)."""
    mean = running_mean_by_loop(source.mean(-1)[None])[0]
    var = running_mean_by_loop(source.var(-1, unbiased=False)[None])[0]
    return norm.scale * (rows - mean[:, None]) / torch.sqrt(var[:, None] + norm.eps) + norm.shift


# ---------------------------------------------------------------------------------------------
# The spec: string form, messages, checks
def test_the_string_form_reads_back_and_is_canonical():
    for spec in SPECS:
        parsed = Interventions.parse(spec)
        assert Interventions.parse(str(parsed)) == parsed
    one = Interventions.parse("identity trf_blocks[2].norm1 ;  zero  trf_blocks[3].att head 5;"
                              "zero trf_blocks[3].att head 1")
    assert str(one) == "identity trf_blocks[2].norm1; zero trf_blocks[3].att heads 1,5"
    assert one == Interventions([Intervention("zero_heads", 3, (5, 1)),
                                 Intervention("identity_norm1", 2)])
    assert Interventions.parse("") == Interventions() == Interventions.of(None)
    assert not Interventions()


def test_the_messages_have_ids_and_fields_for_the_page():
    one = Interventions.parse("zero trf_blocks[3].att head 5")
    message = one.describe().message
    assert (message.id, message.fields["part"], message.fields["heads"]) == \
        ("intervention.zero_head", "trf_blocks[3].att", "5")
    assert one.name() == "trf_blocks[3].att head 5 zeroed"
    two = Interventions.parse("zero trf_blocks[3].att heads 1,5; identity final_norm")
    assert two.describe().message.id == "intervention.and"
    assert two.name() == ("trf_blocks[3].att heads 1, 5 zeroed; "
                          "final_norm replaced by the identity")
    assert Interventions().name() == "no intervention"
    for kind in KINDS:       # every kind says itself
        item = Intervention(kind.kind, None if kind.part in ("pos_emb", "final_norm") else 0,
                            (0, 1) if kind.heads else (), source=(1, 2) if kind.patch else ())
        message = item.describe().message
        where = item.part if kind.part in ("pos_emb", "final_norm") else item.block
        assert message.id.startswith("intervention.") and where in str(message)


@pytest.mark.parametrize("text, message_id", [
    ("blah", "intervention.unreadable"),
    ("zero trf_blocks[x].att", "intervention.unreadable"),
    ("relu trf_blocks[1].norm1", "intervention.verb_for_part"),
    ("mean trf_blocks[1].att", "intervention.verb_for_part"),
    ("identity trf_blocks[1].norm1; freeze trf_blocks[*].norm1", "intervention.conflict"),
    ("zero trf_blocks[1].att head 1; mean trf_blocks[1].att heads 1,2", "intervention.conflict"),
    ("zero trf_blocks[*].att heads 0,1; mean trf_blocks[2].att heads 1,2",
     "intervention.conflict"),
    ("remove trf_blocks[0].ſhortcut", "intervention.no_part"),       # ſ: U+017F, long s
    ("zero trf_blocks[0].attention", "intervention.no_part"),
    pytest.param("zero trf_blocks[" + "7" * 5000 + "].att", "intervention.long_number",
                 id="block-of-5000-digits"),
    pytest.param("zero trf_blocks[0].att head " + "7" * 5000, "intervention.long_number",
                 id="head-of-5000-digits"),
])
def test_unreadable_or_clashing_text_gets_a_message(text, message_id):
    with pytest.raises(ExplorerError) as error:
        Interventions.parse(text)
    assert error.value.message.id == message_id


@pytest.mark.parametrize("text, cfg, message_id", [
    ("zero trf_blocks[3].att head 1", CFG, "intervention.no_layer"),
    ("zero trf_blocks[1].att head 4", CFG, "intervention.no_head"),
    ("identity trf_blocks[1].norm1", VARIANTS["no norm"], "intervention.no_norm"),
    ("freeze final_norm", VARIANTS["no norm"], "intervention.no_norm"),
    ("zero pos_emb", VARIANTS["rope"], "intervention.no_pos_emb"),
    ("remove trf_blocks[0].att.shortcut", VARIANTS["no shortcut"], "intervention.no_shortcut"),
    ("relu trf_blocks[0].ff", VARIANTS["relu"], "intervention.already_relu"),
])
def test_an_intervention_that_does_not_apply_to_the_model_gets_a_message(text, cfg, message_id):
    with pytest.raises(ExplorerError) as error:
        Interventions.parse(text).check(cfg)
    assert error.value.message.id == message_id


@pytest.mark.parametrize("args, message_id", [
    (("bogus",), "intervention.unknown_kind"), (("zero_heads", 1), "intervention.needs_heads"),
    (("zero_att", 1, (2,)), "intervention.no_heads_here"),
    (("zero_pos_emb", 1), "intervention.not_in_a_block"),
    (("zero_att", -1), "intervention.not_whole"), (("zero_att", 1.5), "intervention.not_whole"),
])
def test_a_bad_intervention_gets_a_message(args, message_id):
    with pytest.raises(ExplorerError) as error:
        Intervention(*args)
    assert error.value.message.id == message_id


def test_a_model_in_training_mode_is_refused():
    model = GPTModel(CFG)          # (train mode: dropout would change what is removed)
    with pytest.raises(ExplorerError, match="eval mode"), intervening(model, "zero pos_emb"):
        pass


def test_messages_name_parts_in_the_string_form_and_never_echo_a_whole_page():
    """A refusal names the part as the interventions box writes it, a head list plainly,
    and quotes at most 80 characters of what was typed."""
    with pytest.raises(ExplorerError, match=r"^zero att takes no heads\.$"):
        Intervention("zero_att", 1, (2,))
    with pytest.raises(ExplorerError, match=r"heads -1\)"):
        Intervention("zero_heads", 0, (-1,))
    with pytest.raises(ExplorerError) as refused:
        Interventions.parse("frobnicate " * 300)
    assert len(str(refused.value)) < 400 and "…" in str(refused.value)


def test_a_look_alike_letter_is_not_read_as_the_letter_and_the_parts_are_listed():
    """“ſ” case-folds to “s” in Unicode: read as “s” for the match but not for the lookup, the
    part was neither refused as unknown nor found (“… on trf_blocks[i].ſhortcut: .”)."""
    with pytest.raises(ExplorerError) as refused:
        Interventions.parse("remove trf_blocks[0].ſhortcut")
    message = str(refused.value)
    assert message.startswith("“ſhortcut” is not a part of a block"), message
    listed = message.rsplit(" are ", 1)[1].rstrip(".").split(", ")
    assert sorted(listed) == sorted({k.part for k in KINDS} - {"pos_emb", "final_norm"})
    assert str(Interventions.parse("REMOVE TRF_BLOCKS[0].SHORTCUT")) == \
        "remove trf_blocks[0].shortcut"                   # ASCII capitals still read


def test_a_block_or_head_number_of_thousands_of_digits_gets_a_message():
    digits = "7" * MAX_NUMBER_DIGITS
    assert Interventions.parse(f"zero trf_blocks[{digits}].att")[0].layer == int(digits)
    long = "7" * 5000
    for text in (f"zero trf_blocks[{long}].att", f"zero trf_blocks[1].att heads 1,{long}"):
        with pytest.raises(ExplorerError, match=f"at most {MAX_NUMBER_DIGITS} digits.*5,000 "
                                                "digits") as refused:
            Interventions.parse(text)
        assert len(str(refused.value)) < 300


def test_the_limits_are_checked_before_any_part_is_read(monkeypatch):
    """A million heads (6.9 MB of text) or one part too many: refused on the text's length or
    its count of parts, without reading one of them."""
    def read(item):
        raise AssertionError(f"a part was read: {item[:40]}")
    monkeypatch.setattr(interventions_module, "_parse_one", read)
    million = "zero trf_blocks[0].att heads " + ",".join(map(str, range(10 ** 6)))
    with pytest.raises(ExplorerError) as refused:
        Interventions.parse(million)
    assert refused.value.message.id == "intervention.too_long"
    assert f"at most {MAX_INTERVENTION_CHARS:,} characters" in str(refused.value)
    with pytest.raises(ExplorerError) as refused:
        Interventions.parse("zero pos_emb;" * (MAX_INTERVENTIONS + 1))
    assert refused.value.message.id == "intervention.too_many"
    assert f"at most {MAX_INTERVENTIONS:,}" in str(refused.value)
    with pytest.raises(AssertionError, match="a part was read"):     # within both: read
        Interventions.parse("zero pos_emb;" * MAX_INTERVENTIONS + " ;  ; ")


def test_the_most_parts_the_limits_allow_are_read_and_merged():
    text = "; ".join(f"zero trf_blocks[{i % 3}].att head {i}" for i in range(MAX_INTERVENTIONS))
    assert len(text) <= MAX_INTERVENTION_CHARS
    merged = Interventions.parse(text)
    assert [(i.layer, len(i.heads)) for i in merged] == [(0, 667), (1, 667), (2, 666)]
    heads = ",".join(map(str, range(15_000)))
    assert len(Interventions.parse(f"zero trf_blocks[0].att heads {heads}")[0].heads) == 15_000


def test_merging_twenty_thousand_items_keeps_one_per_kind_and_block():
    """Linear merging (issue 32: 20,000 heads took 85 s): heads of one block joined once;
    distinct blocks kept in order; parts that exclude each other still found among them."""
    heads = Interventions([Intervention("zero_heads", 0, (h,)) for h in reversed(range(20_000))])
    assert len(heads) == 1 and heads[0].heads == tuple(range(20_000))
    blocks = Interventions([Intervention("zero_ff", b) for b in reversed(range(20_000))])
    assert [i.layer for i in blocks] == list(range(20_000))
    every = Interventions([*blocks, Intervention("zero_ff")])
    assert str(every) == "zero trf_blocks[*].ff"
    many = [Intervention("identity_norm1", b) for b in range(20_000)]
    with pytest.raises(ExplorerError, match=re.escape("“freeze trf_blocks[*].norm1” and "
                                                      "“identity trf_blocks[0].norm1”")):
        Interventions([*many, Intervention("freeze_norm1")])
    with pytest.raises(ExplorerError, match=re.escape("trf_blocks[19999]")):
        Interventions([*many, Intervention("freeze_norm1", 19_999)])


@pytest.mark.parametrize("text, merged", [
    ("freeze trf_blocks[*].norm1; freeze trf_blocks[0].norm1", "freeze trf_blocks[*].norm1"),
    ("freeze trf_blocks[2].norm2; freeze trf_blocks[*].norm2", "freeze trf_blocks[*].norm2"),
    ("mean trf_blocks[*].att head 1; mean trf_blocks[0].att heads 1,2",
     "mean trf_blocks[*].att head 1; mean trf_blocks[0].att head 2"),
    ("mean trf_blocks[*].att heads 1,2; mean trf_blocks[0].att head 1",
     "mean trf_blocks[*].att heads 1,2"),
    ("relu trf_blocks[*].ff; relu trf_blocks[1].ff; zero trf_blocks[1].ff",
     "relu trf_blocks[*].ff; zero trf_blocks[1].ff"),
])
def test_an_intervention_on_every_block_covers_the_same_on_one_block(text, merged):
    """Written on every block and on one of them, it applies once there: a running mean
    applied twice failed (“running mean … 4 positions kept”), and would average itself."""
    model = book_model(CFG)
    assert str(Interventions.parse(text)) == merged
    with torch.no_grad(), intervening(model, text):
        ours = model(IDS)
    torch.testing.assert_close(ours, hooked_copy(model, merged)(IDS), rtol=1e-5, atol=1e-5)

