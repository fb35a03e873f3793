"""简体中文 for the page's share views (see zh_ui.py for the conventions)."""

ZH_SHARE: dict[str, str] = {
}
