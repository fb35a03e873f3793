"""The GPT-2 byte-pair-encoding tokenizer, loaded offline from assets/gpt2.tiktoken.

The rank file is OpenAI's ``r50k_base.tiktoken`` (shipped by openai-whisper as
``gpt2.tiktoken``, MIT licence). Together with the pattern and the single special
token below it is exactly tiktoken's ``gpt2`` encoding, which the book uses.

We read and parse the file ourselves instead of calling
``tiktoken.load.load_tiktoken_bpe``: that function copies even local files into
``TIKTOKEN_CACHE_DIR`` (or ``$TMPDIR/data-gym-cache``) and raises if a
user-set cache dir is not writable. Here nothing is written anywhere.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import operator
import os
from pathlib import Path

import tiktoken

from .errors import ExplorerError

EOT_TEXT = "<|endoftext|>"
EOT_ID = 50256
N_VOCAB = 50257

GPT2_TIKTOKEN_PATH = Path(__file__).resolve().parents[2] / "assets" / "gpt2.tiktoken"
GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"

# tiktoken's gpt2/r50k_base pattern: GPT-2's original regex with possessive
# quantifiers (same splits, faster). A test checks it against tiktoken_ext.
GPT2_PAT_STR = (r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++"""
                r"""|\s++$|\s+(?!\S)|\s""")


def load_ranks(path: str | os.PathLike = GPT2_TIKTOKEN_PATH) -> dict[bytes, int]:
    """Read a ``.tiktoken`` rank file (one ``base64(token) rank`` per line), checking its sha256."""
    path = Path(path)
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != GPT2_TIKTOKEN_SHA256:
        raise ExplorerError("tokenizer.corrupt", "The GPT-2 tokenizer file {path} is corrupt: "
                            "its sha256 is {actual}, expected {expected}. Restore it from the "
                            "repository (git checkout -- assets/gpt2.tiktoken).", path=path,
                            actual=actual, expected=GPT2_TIKTOKEN_SHA256)
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def as_token_ids(ids) -> list[int]:
    """Accept a list/tuple/iterable of ints or a 1-D torch tensor / numpy array."""
    if hasattr(ids, "tolist"):  # torch.Tensor, numpy.ndarray: avoids a slow per-element loop
        ids = ids.tolist()
    if isinstance(ids, (int, str, bytes)):
        raise ExplorerError("tokenizer.ids_not_a_sequence", "Expected a sequence of token ids, "
                            "got {kind} {ids!r}.", kind=type(ids).__name__, ids=ids)
    out = []
    for i in ids:
        try:
            if isinstance(i, bool):
                raise TypeError
            out.append(operator.index(i))  # int, numpy/torch integer scalars; not floats
        except TypeError:
            raise ExplorerError("tokenizer.id_not_an_integer", "Token ids must be integers, got "
                                "{kind} {value!r}.", kind=type(i).__name__, value=i) from None
    return out


def _show_bytes(raw: bytes) -> str:
    """Decode UTF-8, but show bytes that are not a whole character as ``<0xE4>``."""
    parts = []
    while raw:
        try:
            parts.append(raw.decode("utf-8"))
            break
        except UnicodeDecodeError as e:
            parts.append(raw[: e.start].decode("utf-8"))
            parts.extend(f"<0x{b:02X}>" for b in raw[e.start : e.end])
            raw = raw[e.end :]
    return "".join(parts)


def _whole(piece: bytes) -> bool:
    """Whether ``piece`` is whole UTF-8 characters."""
    try:
        piece.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


class Tokenizer:
    """GPT-2 BPE. Immutable after construction, so one instance can be shared across threads."""

    def __init__(self, path: str | os.PathLike = GPT2_TIKTOKEN_PATH):
        self.encoding = tiktoken.Encoding(
            name="gpt2",
            pat_str=GPT2_PAT_STR,
            mergeable_ranks=load_ranks(path),
            special_tokens={EOT_TEXT: EOT_ID},
            explicit_n_vocab=N_VOCAB,
        )
        self.n_vocab: int = self.encoding.n_vocab
        self.eot_id: int = EOT_ID

    def encode(self, text: str, allow_special: bool = False) -> list[int]:
        """Text to token ids. ``<|endoftext|>`` typed by a user is plain text (several
        tokens) unless ``allow_special`` is set, then it is the single id 50256."""
        if not isinstance(text, str):
            raise ExplorerError("tokenizer.text_not_a_string", "Text to encode must be a string, "
                                "got {kind}.", kind=type(text).__name__)
        if allow_special:
            return self.encoding.encode(text, allowed_special={EOT_TEXT})
        # encode_ordinary never raises on special-token text (encode() would).
        return self.encoding.encode_ordinary(text)

    def _checked(self, ids) -> list[int]:
        ids = as_token_ids(ids)
        bad = [i for i in ids if not 0 <= i < self.n_vocab]
        if bad:
            raise ExplorerError("tokenizer.outside_vocabulary", "Token id {bad} is outside the "
                                "GPT-2 vocabulary [0, {n_vocab}); {n_bad} invalid id(s) in total.",
                                bad=bad[0], n_vocab=self.n_vocab, n_bad=len(bad))
        return ids

    def decode(self, ids) -> str:
        """Token ids to text; bytes that are not valid UTF-8 become U+FFFD."""
        return self.encoding.decode(self._checked(ids), errors="replace")

    def token_text(self, token_id: int) -> str:
        """The piece of text one token stands for, for display."""
        (token_id,) = self._checked([token_id])
        return _show_bytes(self.encoding.decode_single_token_bytes(token_id))

    def token_texts(self, ids) -> list[str]:
        return [_show_bytes(self.encoding.decode_single_token_bytes(i)) for i in self._checked(ids)]

    def character_runs(self, ids, longest: int = 8) -> list[tuple[str | None, int]]:
        """``ids`` in runs: ``(None, 1)`` for a token of whole UTF-8 characters, ``(text, n)``
        for ``n`` byte tokens (``longest`` at most) that make ``text`` together (a Chinese
        character, an emoji); ``(None, n)`` for an unfinished run at the end."""
        runs, joined, n = [], b"", 0
        for tid in ids:
            piece = self.encoding.decode_single_token_bytes(tid) if 0 <= tid < self.n_vocab \
                else b""
            if not n and _whole(piece):
                runs.append((None, 1))
                continue
            joined, n = joined + piece, n + 1
            if _whole(joined) or n >= longest:
                runs.append((joined.decode("utf-8", errors="replace"), n))
                joined, n = b"", 0
        return runs + [(None, n)] * (n > 0)


@functools.lru_cache(maxsize=None)
def get_tokenizer() -> Tokenizer:
    """The shared GPT-2 tokenizer from assets/ (built on first use, ~0.1 s).

    Two threads racing on the very first call may each build one; the cache then
    keeps one, and every later call returns that same instance.
    """
    return Tokenizer()
