"""简体中文 for the core's messages (``book``, ``probes``, ``runtime``, ``native``): each key is
the English f-string as written in the source (``ast.unparse``'s spelling of each field), each
value its Chinese, with the same fields. ``tests/test_i18n.py`` checks that every message the
core raises has one."""

ZH_CORE: dict[str, str] = {
}
