"""简体中文 for the page's compare views (see zh_ui.py for the conventions)."""

ZH_COMPARE: dict[str, str] = {
}
