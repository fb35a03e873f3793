"""The app's only uses of Gradio's private parts (``explorer.app.gradio_private``), pinned to
the pinned Gradio: each still does what the app relies on. A new Gradio that changes one of
them fails here first."""
import gradio as gr
import pytest
from local_client import close_soon, local_client

from explorer.app import gradio_private


def test_gradio_is_the_pinned_release():
    assert gr.__version__ == gradio_private.PINNED_GRADIO


@pytest.fixture(scope="module")
def small_app():
    with gr.Blocks() as demo:
        value = gr.State(0)
        box = gr.Textbox(elem_id="box")
        box.submit(lambda text, n: (text, n + 1), [box, value], [box, value], api_name="echo")
    _, url, _ = demo.queue().launch(prevent_thread_lock=True, quiet=True, server_port=None)
    yield demo, url
    demo.close()


def test_a_forgotten_session_leaves_no_entry(small_app):
    demo, url = small_app
    client = local_client(url)
    try:
        client.predict("hi", api_name="/echo")
        session = client.session_hash
        assert session in demo.state_holder
        assert gradio_private.forget_session(demo, session)
        assert session not in demo.state_holder
        assert not gradio_private.forget_session(demo, session)   # nothing left to forget
    finally:
        close_soon(client)


def test_files_go_to_gradios_cache(tmp_path):
    path = gradio_private.save_to_cache(b"a,b\r\n", "x.csv")
    assert path.startswith(gradio_private.cache_folder())
    with open(path, "rb") as f:
        assert f.read() == b"a,b\r\n"


def test_a_translated_labels_id_is_found_in_the_component_and_in_the_api_description():
    i18n = gr.I18n(en={"x.label": "a label"})
    with gr.Blocks() as demo:
        box = gr.Textbox(label=i18n("x.label"))
        box.submit(lambda s: s, box, box, api_name="echo")
    assert gradio_private.label_key(box.label) == "x.label"
    described = demo.get_api_info()["named_endpoints"]["/echo"]["parameters"][0]
    assert gradio_private.label_key(described["label"]) == "x.label"
    assert gradio_private.label_key("plain text") is None


def test_no_other_app_module_touches_gradios_private_parts():
    """Outside ``gradio_private``, the app reads no private attribute (one leading underscore)
    of an object it did not make, and imports no Gradio module but ``gradio`` itself (nor
    plotly's: the figures use its templates, subplots and ``automargin``)."""
    import ast
    from pathlib import Path
    app = Path(gradio_private.__file__).parent
    found = []
    for path in sorted(app.rglob("*.py")):
        if path.name == "gradio_private.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradio."):
                found.append(f"{path.name}:{node.lineno}: from {node.module}")
            if isinstance(node, ast.Import):
                found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                          if a.name.startswith("gradio.")]
    assert found == []


def test_the_pages_script_uses_no_private_part_of_gradios_page():
    """``static/page.js`` knows nothing of Gradio's files or page structure: no hashed asset,
    no class or attribute of Gradio's own, no polling for Gradio's elements. The one thing
    with no public way, the switch of Gradio's locale, is handed to it from
    ``gradio_private``."""
    from pathlib import Path

    from explorer.app import layout
    script = (Path(gradio_private.__file__).parent / "static" / "page.js").read_text()
    script = script.replace("\\/", "/")     # (as a regular expression writes it)
    private = ["/assets/", "core-", ".visually-hidden", "More tabs", "data-tab-id",
               ".toast-title", "setInterval", "changeLocale("]
    assert [word for word in private if word in script] == []
    assert "changeLocale(locale)" in gradio_private.SWITCH_LOCALE_JS
    assert "/assets/core-" in gradio_private.SWITCH_LOCALE_JS.replace("\\/", "/")
    assert layout.JS.rstrip().endswith(gradio_private.SWITCH_LOCALE_JS + "); }")
