"""The app's text box: Gradio's Textbox, whose value must arrive as text.

Gradio's own turns any JSON value into text (a list ``["hi"]`` would reach the handler as the
string ``"['hi']"``, and no handler could tell); this one refuses it, by the public hook every
component has (``preprocess``). (Gradio writes a type stub, ``textbox.pyi``, beside a module
that subclasses a component: it is not kept in git.)"""
from __future__ import annotations

import gradio as gr

from .gradio_private import label_key
from .i18n import english
from .inputs import kind_of


class Textbox(gr.Textbox):
    def preprocess(self, payload):
        if payload is not None and not isinstance(payload, str):
            key = label_key(self.label)
            name = english(key) if key else self.label or "A text input"
            raise gr.Error(f"{name} must be text (got {kind_of(payload).text}).",
                           print_exception=False)
        return super().preprocess(payload)
