"""Freed memory goes back to the system: glibc settings, and a trim after every app handler."""
import sys

import gradio as gr
import pytest

from explorer.runtime import heap
from explorer.app.handlers import handler
from explorer.book.errors import ExplorerError


def test_glibc_settings_apply_on_linux():
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc only")
    assert heap.release_freed_memory_promptly() is True
    assert isinstance(heap.trim(), bool)


@pytest.fixture
def trims(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "trim", lambda: calls.append(1) or True)
    return calls


def test_every_handler_trims_the_heap_when_done_even_after_an_error(trims):
    ok = handler(outputs=("x",))(lambda: {"x": "done"})
    assert ok() == {"x": "done"} and len(trims) == 1

    def broken():
        raise ExplorerError("test.bad", "bad input")
    with pytest.raises(gr.Error, match="bad input"):
        handler(outputs=())(broken)()
    assert len(trims) == 2


def test_a_streaming_handler_trims_once_at_its_end_not_per_update(trims):
    def stream():
        for i in range(5):
            yield {"n": i}
    updates = handler(outputs=("n",))(stream)()
    assert next(updates) == {"n": 0} and trims == []
    assert [u["n"] for u in updates] == [1, 2, 3, 4] and len(trims) == 1
