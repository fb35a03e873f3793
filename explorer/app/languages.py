"""The page's languages: English, in which every text is written where it is made, and one
catalogue file per other language in ``i18n/`` (``zh.json``), whose entries are the texts'
ids. A new language is a new file: its name and Gradio locale are in the file."""
from __future__ import annotations

import json
from pathlib import Path

FOLDER = Path(__file__).parent / "i18n"


def _load() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(FOLDER.glob("*.json"))}


CATALOGUES = _load()
# code -> (the language's own name, Gradio's locale for it); English first
LANGUAGES = {"en": ("English", "en"),
             **{code: (c["language"]["name"], c["language"]["locale"])
                for code, c in CATALOGUES.items()}}


def messages(lang: str) -> dict[str, str]:
    """The texts of ``lang`` by id (none for English: its texts are in the code)."""
    return CATALOGUES[lang]["messages"] if lang in CATALOGUES else {}
