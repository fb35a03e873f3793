"""A page text in Chinese, found by its English (the browser tests read what the page shows):
the catalogue's text of the id whose English it is."""
from source_texts import source_texts
from explorer.app.languages import messages

_BY_ENGLISH = {text: messages("zh").get(id_, text) for id_, (text, _) in source_texts().items()}


def zh(text: str) -> str:
    return _BY_ENGLISH.get(text, text)
