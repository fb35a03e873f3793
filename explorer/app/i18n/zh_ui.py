"""简体中文 for the page: widgets' labels and choices (``label``), and the text the server makes
(``t``): status lines, notes, figures, tables and the app's own messages. Each key is the
English text as the code writes it, ``{fields}`` included."""

ZH_UI: dict[str, str] = {
}
