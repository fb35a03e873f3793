"""The page's components by name (their ``elem_id``, as the style sheet, the page's script and
the browser tests name them), and its events wired by name: a handler declares its outputs
(``handlers.handler``) and returns ``{name: value}``; ``Page.on`` hands Gradio what it wants."""
from __future__ import annotations

import functools
import inspect
import threading
import time

import anyio
import gradio as gr

from .handlers import Pause, declared


class Page:
    def __init__(self, demo=None):
        self._parts: dict[str, gr.components.Component] = {}
        self.demo = demo
        # Which tab made each component and wired each event (layout.py says which tab is
        # being made or wired): a test holds that no tab reads another tab's widgets.
        self.tab: str | None = None
        self.owners: dict[str, str | None] = {}
        self.events: list[tuple[str | None, str, tuple, tuple]] = []   # tab, fn, ins, outs

    def add(self, component, name: str | None = None):
        """Register ``component`` under ``name`` (default: its elem_id); returns it."""
        name = name or getattr(component, "elem_id", None)
        if not name or name in self._parts:
            raise RuntimeError(f"a component needs a new, unique name (got {name!r})")
        self._parts[name] = component
        self.owners[name] = self.tab
        return component

    def __getitem__(self, name: str):
        return self._parts[name]

    def on(self, triggers, fn, inputs=None, **options):
        """Run handler ``fn`` on ``triggers`` ("att_btn.click", event listeners, or a list),
        with the components named in ``inputs`` (default: the handler's own) and its outputs."""
        triggers = triggers if isinstance(triggers, (list, tuple)) else [triggers]
        if all(isinstance(t, str) and t.endswith(".input") for t in triggers):
            # A choice the user makes always gets its view: a second choice made while the
            # first one's view is drawn is run after it (Gradio's default drops it, and the
            # view would stay on the first choice while the picker shows the second).
            options.setdefault("trigger_mode", "always_last")
        return gr.on([self._listener(t) for t in triggers], *self._wired(fn, inputs), **options)

    def then(self, dependency, fn, inputs=None, success=True, on=None, **options):
        """Run ``fn`` after ``dependency``: on success (default), always (``success=False``),
        or ``on="failure"``."""
        chain = getattr(dependency, on or ("success" if success else "then"))
        return chain(*self._wired(fn, inputs), **options)

    def _wired(self, fn, inputs):
        """Gradio's (fn, inputs, outputs) for handler ``fn``, the event recorded."""
        inputs = getattr(fn, "inputs", None) if inputs is None else inputs
        if inputs is None:
            raise TypeError(f"{fn.__name__}: name its inputs (handler(inputs=...) or the event's)")
        self.events.append((self.tab, fn.__name__, tuple(inputs), declared(fn)))
        return by_name(fn, self), [self[n] for n in inputs], [self[n] for n in declared(fn)]

    def _listener(self, trigger):
        if not isinstance(trigger, str):
            return trigger
        name, _, event = trigger.rpartition(".")
        return getattr(self[name], event)


def on_load_js(name: str) -> str:
    """A gr.HTML's ``js_on_load`` that hands the component to the page's script,
    ``gptExplorer.<name>(element, trigger)`` (static/page.js), once that has started (it may
    start after the component: waited for, 10 s at most)."""
    return (f"(function start(tries) {{ const ex = window.gptExplorer; "
            f"if (ex && ex.{name}) ex.{name}(element, trigger); "
            f"else if (tries > 0) setTimeout(() => start(tries - 1), 50); }})(200);")


_END = object()


def close_when_free(steps) -> None:
    """Close the generator ``steps`` (its ``finally`` ends the work); if a thread is in one of
    its steps (the page went away meanwhile), as soon as that step ends."""
    try:
        steps.close()
    except ValueError:                   # "generator already executing"
        def later():
            while True:
                try:
                    steps.close()
                    return
                except ValueError:
                    time.sleep(0.05)
        threading.Thread(target=later, daemon=True, name="close-stream").start()


def by_name(fn, page: Page):
    """``fn``, its ``{name: value}`` results given to Gradio as ``{component: value}``."""
    def components(result):
        if not result:      # nothing to update (Gradio reads an empty dict as one value)
            n = len(declared(fn))
            return None if n == 0 else gr.skip() if n == 1 else (gr.skip(),) * n
        return {page[name]: value for name, value in result.items()}

    if getattr(fn, "pauses", False):
        @functools.wraps(fn)
        async def paused(*args, **kwargs):
            # Each step in a thread, each pause awaited: a watching stream holds no thread
            # between its updates (handlers.Pause).
            steps = fn.pausing(*args, **kwargs)
            try:
                while True:
                    result = await anyio.to_thread.run_sync(next, steps, _END)
                    if result is _END:
                        return
                    if isinstance(result, Pause):
                        await anyio.sleep(result.seconds)
                        continue
                    yield components(result)
            finally:
                close_when_free(steps)
        wrapped = paused
    elif inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(*args, **kwargs):
            for result in fn(*args, **kwargs):
                yield components(result)
        wrapped = stream
    else:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            return components(fn(*args, **kwargs))
        wrapped = call
    wrapped.__signature__ = inspect.signature(fn)
    return wrapped
