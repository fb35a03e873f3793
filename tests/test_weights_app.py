"""Real weights in the app, through its API (gradio_client, the app in-process): /build with
each weights choice (a file by path or upload, OpenAI's GPT-2 through a stand-in hub, with
progress; offline; over the budget), every view on the loaded model, captions that say which
weights are shown, and /export_model then /build from the file giving identical logits."""
import json
import time
from pathlib import Path

import pytest
import torch
from gradio_client import handle_file
from local_client import close_soon, launched, local_client

transformers = pytest.importorskip("transformers")

from explorer.app import shared  # noqa: E402
from explorer.app.handlers import declared  # noqa: E402
from explorer.app.refresh import weights_notes  # noqa: E402
from explorer.app.server import launch_options  # noqa: E402
from explorer.app.tabs import build as build_tab  # noqa: E402
from explorer.book.config import PRESETS, count_parameters  # noqa: E402
from explorer.book.tokenizer import get_tokenizer  # noqa: E402
from explorer.runtime import checkpoints  # noqa: E402
from explorer.runtime import hub as runtime_hub  # noqa: E402
from explorer.runtime.build import build_model  # noqa: E402

from hub_stand_in import HubStandIn  # noqa: E402
from test_weights import make_hf_checkpoint  # noqa: E402

PROMPT = "Every effort moves you"
VIEW = ("norm1: before vs after LayerNorm", "resid_pre", "std")
# A tiny GPT-2 with the tokenizer's vocabulary, so that every view can read a real prompt.
TINY = dict(n_embd=64, n_layer=2, n_head=4, n_positions=48, vocab_size=50257)
# /build's outputs by name (the API sends them in this order; the session is not one).
OUTPUTS = [name for name in declared(build_tab.build) if name != "session"]
KNOB_AT = {k: OUTPUTS.index(k) for k in build_tab.FIELDS}
NOTES_AT = [OUTPUTS.index(n) for n in weights_notes()]


def random_args(preset="teach-tiny", seed=123):
    cfg = PRESETS[preset].to_dict()
    return dict(preset=preset, **{k: cfg[k] for k in build_tab.FIELDS}, seed=seed, device="cpu",
                dtype="float32", api_name="/build")


def load_args(weights="file", **given):
    """/build for a checkpoint: the knobs are the page's defaults (ignored for a checkpoint)."""
    return {**random_args(), "weights": weights, **given}


@pytest.fixture(scope="module")
def app_url():
    with launched(**{**launch_options(host="127.0.0.1"), "server_port": None}) as url:
        yield url


@pytest.fixture
def client(app_url):
    c = local_client(app_url)
    yield c
    close_soon(c)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny GPT-2 saved by transformers' save_pretrained: (the model, its folder)."""
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    return make_hf_checkpoint(folder, **TINY), folder


def hf_greedy(hf, ids, n):
    out = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(n):
            out = torch.cat([out, hf(out).logits[:, -1:].argmax(-1)], dim=1)
    return out[0, len(ids):].tolist()


def cached_model(source_kind, digest=None):
    """The model the app holds for a checkpoint (the app runs in this process)."""
    for key in list(shared.CACHE._models):
        if key.source.kind == source_kind and (digest is None or key.source.digest == digest):
            return shared.CACHE.get(key)[0]
    raise AssertionError(f"no {source_kind} model in the app's cache")


# ---------------------------------------------------------------------------------------------
# From a file
def test_a_checkpoint_path_loads_and_every_view_runs_on_it_and_says_so(client, checkpoint):
    hf, folder = checkpoint
    result = client.predict(**load_args(weights_path=str(folder / "model.safetensors")))
    status = result[0]
    digest = checkpoints.sha256_file(folder / "model.safetensors")
    caption = f"from file model.safetensors (sha256 {digest[:8]}…)"
    assert "Model ready" in status and caption in status
    total = count_parameters(checkpoints.inspect_file(folder / "model.safetensors").config).total
    assert f"{total:,}" in status
    # The knobs now show the checkpoint's config (4 heads, from config.json beside the file).
    assert result[KNOB_AT["n_heads"]] == 4 and result[KNOB_AT["emb_dim"]] == 64
    assert result[KNOB_AT["tie_weights"]] is True
    assert all(caption in note for note in [result[i] for i in NOTES_AT]) and len([result[i] for i in NOTES_AT]) == 4
    # the tie: counted once, and said so in the table and the memory note
    table, memory = result[2], result[4]
    assert "tied" in dict((r[0], r[1]) for r in table["data"])["output head"]
    assert "counted once" in memory

    chips, info, *_ = client.predict(PROMPT, 1, *VIEW, api_name="/trace")
    assert caption in info and "4 tokens" in info
    att, grid, entropy, named, scores = client.predict(1, "2", api_name="/attention")
    assert json.loads(att["plot"])["data"]
    lens = client.predict(PROMPT, api_name="/logit_lens")
    assert json.loads(lens["plot"])["data"]
    # Greedy generation (the C decode step where it applies) gives transformers' tokens.
    ids = get_tokenizer().encode(PROMPT)
    expected = PROMPT + get_tokenizer().decode(hf_greedy(hf, ids, 8))
    text = client.predict(PROMPT, 8, "greedy", 1.0, 50, 123, False, api_name="/generate")[0]
    assert text == expected
    step = client.predict(PROMPT, "", "greedy", 1.0, 50, 123, api_name="/next_token")[0]
    assert step == PROMPT + get_tokenizer().decode(hf_greedy(hf, ids, 1))
    # The shortcut lesson builds the loaded model's config fresh (loaded weights have no seed).
    book, gpt = client.predict(api_name="/gradients")
    assert json.loads(gpt["plot"])["data"]


def test_an_upload_with_its_config_loads_and_a_second_session_shares_the_copy(app_url,
                                                                             checkpoint):
    _, folder = checkpoint
    files = [handle_file(str(folder / "model.safetensors")),
             handle_file(str(folder / "config.json"))]
    first, second = local_client(app_url), local_client(app_url)
    try:
        result = first.predict(**load_args(weights_upload=files))
        assert "from file model.safetensors" in result[0]
        assert result[KNOB_AT["n_heads"]] == 4            # from the uploaded config.json
        again = second.predict(**load_args(weights_upload=files))[0]
        assert "from the shared cache" in again
        # After eviction the session's key rebuilds the model (from the converted store).
        shared.CACHE.clear()
        info = second.predict(PROMPT, 0, *VIEW, api_name="/trace")[1]
        assert "from file model.safetensors" in info
    finally:
        close_soon(first)
        close_soon(second)


def test_an_upload_without_its_config_says_what_it_assumed(client, checkpoint):
    _, folder = checkpoint
    # Only the weights' parameters, as the README shows (the rest take the page's defaults).
    result = client.predict(weights="file", api_name="/build",
                            weights_upload=[handle_file(str(folder / "model.safetensors"))])
    assert "assumed n_heads = 1" in result[0] and result[KNOB_AT["n_heads"]] == 1


@pytest.mark.parametrize("given, message", [
    (dict(weights_path=""), r"give the path of a model.safetensors .* or upload"),
    (dict(weights_path="/no/such/model.safetensors"), r"No checkpoint could be loaded from "
                                                      r"that path on the server"),
    (dict(weights="trained"), r"'trained' .* not in the list of choices: \['random', "
                              r"'pretrained', 'file'\]"),
    (dict(weights="pretrained", size="huge"), r"huge is not in the list of choices: \[.small."),
])
def test_bad_weights_choices_get_a_clear_message(client, given, message):
    with pytest.raises(Exception, match=message):
        client.predict(**load_args(**given))
    assert "Model ready" in client.predict(**random_args())[0]   # the session still works


def test_a_bad_upload_gets_a_clear_message(client, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    with pytest.raises(Exception, match=r"Invalid file type.*\.safetensors"):   # Gradio's check
        client.predict(**load_args(weights_upload=[handle_file(str(text))]))
    fake = tmp_path / "model.safetensors"
    fake.write_bytes(b"hello, I am not a model")
    with pytest.raises(Exception, match=r"Upload one weights file"):
        client.predict(**load_args(weights_upload=[handle_file(str(fake)),
                                                   handle_file(str(fake))]))
    with pytest.raises(Exception, match=r"not a safetensors file"):
        client.predict(**load_args(weights_upload=[handle_file(str(fake))]))


def test_server_paths_can_be_switched_off(client, checkpoint, monkeypatch):
    from explorer.runtime import server_paths
    _, folder = checkpoint
    monkeypatch.setenv(server_paths.SERVER_PATHS_ENV, "0")
    with pytest.raises(Exception, match=r"switched off here; upload the file"):
        client.predict(**load_args(weights_path=str(folder / "model.safetensors")))
    monkeypatch.delenv(server_paths.SERVER_PATHS_ENV)
    monkeypatch.setenv("SPACE_ID", "someone/gpt-explorer")
    assert not server_paths.server_paths_allowed()


# ---------------------------------------------------------------------------------------------
# Export, then import
@pytest.mark.parametrize("hf_layout", [False, True], ids=["book layout", "hugging face layout"])
def test_export_then_import_gives_identical_logits(client, hf_layout):
    client.predict(**random_args("teach-tiny", seed=7))
    files, note = client.predict(hf_layout, api_name="/export_model")
    names = sorted(Path(f).name for f in files)
    assert names == ["config.json", "model.safetensors"] and "random, seed 7" in note
    config = json.loads(next(Path(f) for f in files if f.endswith(".json")).read_text())
    assert ("n_embd" in config) is hf_layout
    result = client.predict(**load_args(weights_upload=[handle_file(f) for f in files]))
    assert "from file model.safetensors" in result[0]
    weights_file = next(f for f in files if f.endswith(".safetensors"))
    loaded = cached_model("file", checkpoints.sha256_file(weights_file))
    original = build_model(PRESETS["teach-tiny"], seed=7, device="cpu")
    ids = torch.tensor([get_tokenizer().encode(PROMPT)])
    assert torch.equal(loaded(ids), original(ids))


def test_export_before_a_build_asks_for_one(client):
    with pytest.raises(Exception, match="No model yet"):
        client.predict(False, api_name="/export_model")


def test_the_hugging_face_layout_is_refused_for_a_model_gpt2_cannot_hold(client):
    client.predict(**{**random_args(), "norm_placement": "post"})
    with pytest.raises(Exception, match=r"export this model in the book's layout"):
        client.predict(True, api_name="/export_model")


# ---------------------------------------------------------------------------------------------
# OpenAI's GPT-2, through a stand-in for the hub
@pytest.fixture
def stand_in_hub(checkpoint, monkeypatch, tmp_path):
    """openai-community/gpt2 served from 127.0.0.1 as the tiny checkpoint (the real one is
    548 MB; "gpt2-small" is made the tiny one's config), into an empty Hugging Face cache."""
    from huggingface_hub import constants
    _, folder = checkpoint
    cfg = checkpoints.inspect_file(folder / "model.safetensors").config
    real = runtime_hub.gpt2_config
    monkeypatch.setattr(runtime_hub, "gpt2_config",
                        lambda size: cfg if size == "gpt2-small" else real(size))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)
    with HubStandIn({("openai-community/gpt2", "model.safetensors"):
                     folder / "model.safetensors"}) as hub:
        # As HF_ENDPOINT=hub.url would have set them at import.
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            hub.url + "/{repo_id}/resolve/{revision}/{filename}")
        yield hub


def test_pretrained_gpt2_downloads_with_progress_in_the_page(client, stand_in_hub,
                                                            monkeypatch):
    real = runtime_hub._progress_class

    def slowed(progress, label):   # ~1 s for the 13 MB file, so a poll sees the download
        class Slowed(real(progress, label)):
            def update(self, n=1):
                time.sleep(0.005)
                return super().update(n)
        return Slowed

    monkeypatch.setattr(runtime_hub, "_progress_class", slowed)
    job = client.submit(**load_args("pretrained", size="small"))
    seen = set()
    while not job.done():
        status = job.status()
        for unit in (status.progress_data or []):
            if unit.desc:
                seen.add(unit.desc.split(":")[0])
        time.sleep(0.01)
    result = job.result()
    assert "pretrained GPT-2 small (OpenAI)" in result[0] and len(stand_in_hub.gets) == 1
    assert all("pretrained GPT-2 small (OpenAI)" in note for note in [result[i] for i in NOTES_AT])
    assert "Downloading GPT-2 small (openai-community/gpt2)" in seen, seen


def test_the_build_handler_reports_the_download(stand_in_hub):
    """The progress callback Gradio hands /build hears the download, byte by byte."""
    reports = []
    given = {k: v for k, v in load_args("pretrained", size="small").items() if k != "api_name"}
    out = build_tab.build(**given, weights_path="", weights_upload=None, session=None,
                          progress=lambda f, desc=None: reports.append((f, desc)))
    assert "pretrained GPT-2 small" in out["status"]
    downloading = [f for f, d in reports if d and d.startswith("Downloading")]
    assert len(downloading) > 2 and downloading == sorted(downloading) and downloading[-1] == 1.0


def test_offline_without_the_file_the_page_says_what_to_do(client, stand_in_hub, monkeypatch):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(Exception) as err:
        client.predict(**load_args("pretrained", size="small"))
    for needed in ("HF_HUB_OFFLINE", "hf download openai-community/gpt2 model.safetensors",
                   "upload"):
        assert needed in str(err.value)
    assert stand_in_hub.gets == [] and stand_in_hub.heads == []
    assert "Model ready" in client.predict(**random_args())[0]


def test_a_size_over_the_budget_is_refused_before_download_with_the_megabytes(client,
                                                                             stand_in_hub,
                                                                             monkeypatch):
    monkeypatch.setattr(shared.CACHE, "budget_bytes", 300 * 1024 ** 2)
    with pytest.raises(Exception, match=r"needs 5,9\d\d MB .* memory budget is 300 MB"):
        client.predict(**load_args("pretrained", size="xl"))
    assert stand_in_hub.gets == [] and stand_in_hub.heads == []
