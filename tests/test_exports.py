"""Exported files through the app's API: CSV that the ``csv`` module reads back exactly, even
for tokens holding commas, quotes and newlines; and no file left behind in the temp folder
by any export (Gradio serves its own cached copy)."""
import csv
import json
import os
import tempfile
from pathlib import Path

import pytest
from local_client import launched, local_client

from explorer.app.server import launch_options

from bad_inputs import TRACE_VIEW, build_args

# 11 tokens, among them '"', ',' and a newline: a CSV writer must quote and double quotes.
HOSTILE_PROMPT = 'He said "hi, there"\nthen, left'


@pytest.fixture(scope="module")
def app_url():
    with launched(**{**launch_options(host="127.0.0.1"), "server_port": None}) as url:
        yield url


@pytest.fixture(scope="module")
def traced(app_url):
    """A client whose session built teach-tiny and traced the hostile prompt, and the trace's
    tokens (from the JSON export, which JSON quotes correctly)."""
    client = local_client(app_url)
    client.predict(*build_args(), api_name="/build")
    info = client.predict(HOSTILE_PROMPT, 0, *TRACE_VIEW, api_name="/trace")[1]
    assert "11 tokens" in info
    client.predict(0, "mean", api_name="/attention")
    exported = json.loads(Path(client.predict("JSON", api_name="/export_stats"))
                          .read_text(encoding="utf-8"))
    yield client, exported
    client.close()


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("head", ["mean", "0", "3"])
def test_attention_csv_round_trips_through_the_csv_module(traced, head):
    client, exported = traced
    tokens = exported["tokens"]
    assert len(tokens) == 11 and any('"' in t for t in tokens) and "\n" in "".join(tokens)
    rows = read_csv(client.predict(0, head, api_name="/export_attention"))
    assert [len(r) for r in rows] == [12] * 12
    assert rows[0][1:] == tokens                      # the keys, in the header
    assert [r[0] for r in rows[1:]] == tokens         # the queries, one per row
    for i, row in enumerate(rows[1:]):                # causal softmax rows: sum 1, no future
        weights = [float(v) for v in row[1:]]
        assert abs(sum(weights) - 1) < 1e-4
        assert all(w == 0 for w in weights[i + 1:])


def test_statistics_csv_round_trips_through_the_csv_module(traced):
    client, exported = traced
    with open(client.predict("CSV", api_name="/export_stats"), newline="",
              encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(exported["stats"])
    for row, expected in zip(rows, exported["stats"]):
        assert list(row) == list(expected)
        for key, value in expected.items():
            assert (float(row[key]) == pytest.approx(value, nan_ok=True)
                    if isinstance(value, float) else row[key] == str(value)), key


def test_exports_leave_no_file_behind(traced, monkeypatch, tmp_path):
    """20 exports: nothing new in the temp folder (the handlers run in this process, so the
    temp folder is ``tmp_path`` for them too); Gradio's cache holds one copy per content."""
    client, _ = traced
    cache = Path(os.environ["GRADIO_TEMP_DIR"])
    cached_before = {p for p in cache.rglob("*") if p.is_file()}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for i in range(20):
        if i % 4 == 3:
            client.predict(0, "mean", api_name="/export_attention")
        else:
            client.predict(("CSV", "JSON")[i % 2], api_name="/export_stats")
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("gpt_explorer"))
    assert left == [], f"{len(left)} export folders left in the temp folder"
    cached = {p for p in cache.rglob("*") if p.is_file()} - cached_before
    assert len({p for p in cached if "gpt_explorer" in str(p) or p.suffix in (
        ".csv", ".json")}) <= 3
