"""The server's HTTP edge now lives in ``explorer.runtime.guard`` (it has no Gradio in it).
This name stays only for ``server.py``'s import until that file's pending edits land."""
from ..runtime.guard import edge_options  # noqa: F401
