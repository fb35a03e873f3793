"""The GPT-2 tokenizer: known ids, round trips, display pieces, integrity and offline loading."""

import hashlib
import re
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
import tiktoken
import tiktoken.load
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.book.tokenizer import (
    EOT_ID,
    EOT_TEXT,
    GPT2_PAT_STR,
    GPT2_TIKTOKEN_PATH,
    GPT2_TIKTOKEN_SHA256,
    N_VOCAB,
    Tokenizer,
    get_tokenizer,
)

R50K_URL = "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken"

# Text a student might type, plus the awkward cases of byte-level BPE.
CORPUS = [
    "",
    "Every effort moves you",
    "Hello, I am a language model.",
    "I'm sure they'll say you've done what we'd've REALLY wanted; it's theirs.",
    "   leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\r\n\n\nand  double  spaces",
    "0 00 000 0000 00000 000000 0000000 00000000 3.14159 1,000,000 2024-06-01",
    "def f(x):\n    return x ** 2  # square\n",
    "<|endoftext|> in the middle <|endoftext|><|endoftext|>",
    "你好，世界！日本語のテキスト。한국어 텍스트.",
    "Emoji 😀👍🏽 family 👩‍👩‍👧‍👦 flag 🇩🇪 keycap 1️⃣",
    "Ελληνικά, русский, עברית, العربية, हिन्दी, ไทย",
    "combining e\u0301 vs \u00e9, zero\u200bwidth, nbsp\u00a0here, bom\ufeff, line\u2028sep",
    "control \x00\x01\x07\x1b[31m red \x7f",
    "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√ and 🜁",
    "URL https://example.com/a?b=c&d=e#f and e-mail a.b@example.org",
    "x" * 200 + " " + "ab" * 100,
]


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer()


@pytest.fixture(scope="module")
def tiktoken_r50k(tmp_path_factory):
    """tiktoken's own r50k_base encoding, loaded offline from a prepared cache.

    r50k_base has the same ranks (byte-identical file), pattern and special token as
    tiktoken's gpt2, whose data-gym files would need a download.
    """
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    key = hashlib.sha1(R50K_URL.encode()).hexdigest()  # tiktoken's cache file name
    assert key == "0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4"
    shutil.copyfile(GPT2_TIKTOKEN_PATH, cache / key)

    def no_download(blobpath):
        raise AssertionError(f"tiktoken tried to fetch {blobpath}; the offline cache was not used")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(tiktoken.load, "read_file", no_download)
        return tiktoken.get_encoding("r50k_base")


# --- known ids -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, ids",
    [
        ("Every effort moves you", [6109, 3626, 6100, 345]),
        ("Every day holds a", [6109, 1110, 6622, 257]),
        ("Hello, I am", [15496, 11, 314, 716]),
        ("hello world", [31373, 995]),
    ],
)
def test_encode_gives_the_books_token_ids(tok, text, ids):
    assert tok.encode(text) == ids
    assert tok.decode(ids) == text


def test_vocabulary_size_and_end_of_text_id(tok):
    assert N_VOCAB == 50257 and EOT_ID == 50256
    assert tok.n_vocab == N_VOCAB == tok.encoding.n_vocab
    assert tok.eot_id == EOT_ID == tok.encoding.eot_token
    assert tok.decode([EOT_ID]) == EOT_TEXT


def test_end_of_text_is_one_token_only_when_special_tokens_are_allowed(tok):
    text = "hello <|endoftext|>"
    assert tok.encode(text, allow_special=True) == [31373, 220, 50256]

    ids = tok.encode(text)  # typed by a user: plain text
    assert EOT_ID not in ids
    assert len(ids) > 3
    assert tok.decode(ids) == text


def test_get_tokenizer_is_built_once_and_shared():
    assert get_tokenizer() is get_tokenizer()


def test_tokenizer_can_be_shared_by_threads(tok):
    expected = {text: tok.encode(text) for text in CORPUS}
    failures = []

    def work():
        for _ in range(20):
            for text, ids in expected.items():
                if tok.encode(text) != ids or tok.decode(ids) != text:
                    failures.append(text)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", CORPUS)
def test_decode_inverts_encode_for_unicode_text(tok, text):
    ids = tok.encode(text)
    assert all(0 <= i < EOT_ID for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode(text, allow_special=True)) == text


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_decode_inverts_encode_for_any_text(text):
    tok = get_tokenizer()
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(text, allow_special=True)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=())))  # lone surrogates too
def test_encode_never_raises_for_any_str(text):
    ids = get_tokenizer().encode(text)
    assert all(isinstance(i, int) and 0 <= i < N_VOCAB for i in ids)


def test_decode_accepts_tensors_and_arrays(tok):
    ids = [6109, 3626, 6100, 345]
    assert tok.decode(torch.tensor(ids)) == "Every effort moves you"
    assert tok.decode(np.array(ids, dtype=np.int64)) == "Every effort moves you"
    assert tok.decode(iter(ids)) == "Every effort moves you"
    assert tok.token_texts(torch.tensor(ids)) == ["Every", " effort", " moves", " you"]


@pytest.mark.parametrize("bad", [[N_VOCAB], [-1], [6109, 10**9]])
def test_decode_rejects_ids_outside_the_vocabulary(tok, bad):
    with pytest.raises(ValueError, match=r"outside the GPT-2 vocabulary \[0, 50257\)"):
        tok.decode(bad)
    with pytest.raises(ValueError, match="outside the GPT-2 vocabulary"):
        tok.token_texts(bad)


@pytest.mark.parametrize("bad", [[1.5], ["a"], 5, "hello", torch.zeros(2, 2, dtype=torch.long)])
def test_decode_rejects_things_that_are_not_token_ids(tok, bad):
    with pytest.raises(ValueError, match="token ids|Token ids"):
        tok.decode(bad)


def test_decode_of_half_a_character_gives_a_replacement_character(tok):
    first, second = tok.encode("你")  # one CJK character is split over two tokens
    assert tok.decode([first]) == "\ufffd"
    assert tok.decode([first, second]) == "你"


# --- pieces for display --------------------------------------------------------------------


def test_token_text_shows_whole_tokens_as_text(tok):
    assert tok.token_texts(tok.encode("Every effort moves you")) == ["Every", " effort", " moves", " you"]
    assert tok.token_text(EOT_ID) == EOT_TEXT
    assert tok.token_text(2634) == "\u00e9"  # a two-byte character in one token


def test_token_text_shows_bytes_of_a_split_multibyte_character(tok):
    first, second = tok.encode("你")
    assert (tok.token_text(first), tok.token_text(second)) == ("<0xE4><0xBD>", "<0xA0>")
    assert tok.token_texts(tok.encode("你好")) == ["<0xE4><0xBD>", "<0xA0>", "<0xE5><0xA5>", "<0xBD>"]
    # a valid prefix stays text, only the partial character is shown as bytes
    assert tok.token_texts(tok.encode(" 😀")) == [" <0xF0><0x9F><0x98>", "<0x80>"]


def _pieces_to_bytes(pieces):
    out = b""
    for piece in pieces:
        for part in re.split(r"(<0x[0-9A-F]{2}>)", piece):
            out += bytes([int(part[3:5], 16)]) if re.fullmatch(r"<0x[0-9A-F]{2}>", part) else part.encode()
    return out


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="<")))
def test_token_texts_spell_out_every_byte_of_the_text(text):
    tok = get_tokenizer()
    assert _pieces_to_bytes(tok.token_texts(tok.encode(text))) == text.encode()


def test_token_text_rejects_an_id_outside_the_vocabulary(tok):
    with pytest.raises(ValueError, match="50257"):
        tok.token_text(N_VOCAB)


# --- the rank file -------------------------------------------------------------------------


def test_bundled_rank_file_has_the_expected_sha256():
    assert hashlib.sha256(GPT2_TIKTOKEN_PATH.read_bytes()).hexdigest() == GPT2_TIKTOKEN_SHA256
    assert (GPT2_TIKTOKEN_PATH.parent / "gpt2.tiktoken.LICENSE").read_text().startswith("MIT License")


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda data: data + b"\n", id="extra-blank-line-that-would-still-parse"),
        pytest.param(lambda data: data[:-1000], id="truncated"),
        pytest.param(lambda data: data.replace(b"IQ== 0\n", b"IQ== 1\n", 1), id="rank-changed"),
    ],
)
def test_a_corrupted_rank_file_is_refused(tmp_path, corrupt):
    data = GPT2_TIKTOKEN_PATH.read_bytes()
    bad = corrupt(data)
    assert bad != data
    path = tmp_path / "gpt2.tiktoken"
    path.write_bytes(bad)
    with pytest.raises(ValueError, match="corrupt") as info:
        Tokenizer(path)
    assert str(path) in str(info.value)


def test_loading_writes_no_cache(tmp_path, monkeypatch):
    # tiktoken.load.load_tiktoken_bpe would copy even a local file into this dir.
    cache = tmp_path / "cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    assert Tokenizer().encode("hello world") == [31373, 995]
    assert not cache.exists()


def test_loading_works_with_an_unwritable_cache_dir(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")  # a dir below a file cannot be created, even by root
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(blocker / "cache"))
    assert Tokenizer().encode("hello world") == [31373, 995]


def test_importing_the_tokenizer_pulls_in_no_ui_or_torch():
    code = (
        "import sys, explorer.book.tokenizer; "
        "print(sorted(m for m in ('gradio', 'plotly', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- equal to tiktoken's own gpt2 / r50k_base ----------------------------------------------


def test_pattern_and_special_token_are_tiktokens_gpt2(monkeypatch):
    from tiktoken_ext import openai_public

    # Call the registry constructors with their downloads stubbed out, to read their settings.
    calls = []
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda **kw: {})
    monkeypatch.setattr(
        openai_public, "load_tiktoken_bpe", lambda url, expected_hash=None: calls.append((url, expected_hash)) or {}
    )
    for spec in (openai_public.gpt2(), openai_public.r50k_base()):
        assert spec["pat_str"] == GPT2_PAT_STR
        assert spec["special_tokens"] == {EOT_TEXT: EOT_ID}
        assert spec["explicit_n_vocab"] == N_VOCAB
    assert calls == [(R50K_URL, GPT2_TIKTOKEN_SHA256)]  # the same file as ours


def test_every_token_has_the_same_bytes_as_in_tiktoken(tok, tiktoken_r50k):
    assert tiktoken_r50k.n_vocab == tok.n_vocab
    ours, theirs = tok.encoding, tiktoken_r50k
    assert all(ours.decode_single_token_bytes(i) == theirs.decode_single_token_bytes(i) for i in range(N_VOCAB))


@pytest.mark.parametrize("text", CORPUS)
def test_encode_matches_tiktoken_on_a_varied_corpus(tok, tiktoken_r50k, text):
    assert tok.encode(text) == tiktoken_r50k.encode_ordinary(text)
    assert tok.encode(text, allow_special=True) == tiktoken_r50k.encode(text, allowed_special="all")


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_encode_matches_tiktoken_on_any_text(tiktoken_r50k, text):
    assert get_tokenizer().encode(text) == tiktoken_r50k.encode_ordinary(text)
