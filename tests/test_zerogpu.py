"""ZeroGPU (explorer/app/gpu.py): on a ZeroGPU Space the GPU work runs inside ``spaces.GPU``
calls, every yield of a generation included, with a duration that grows with the work; anywhere
else the handlers are the plain functions and ``spaces`` is never imported.

``spaces`` itself is not installed here: a stand-in module, put into ``sys.modules``, records what
runs inside its decorator (the real one is a no-op unless SPACES_ZERO_GPU=true, and then needs
the Space's GPU scheduler)."""
import ast
import functools
import importlib
import inspect
import sys
import types
from pathlib import Path

import pytest

# The app and Gradio imported first: Gradio itself looks for `spaces` when it is imported,
# which is not ours to count.
import explorer.app.server  # noqa: F401
from explorer.app import gpu
from explorer.book.config import PRESETS, count_parameters
from explorer.runtime.sources import ModelKey


class StandInSpaces(types.ModuleType):
    """``spaces.GPU(task, duration=...)`` as ZeroGPU calls it: the duration is asked for with
    the call's arguments, then the task runs "on the GPU" (``inside`` is True meanwhile)."""

    def __init__(self):
        super().__init__("spaces")
        self.inside = False
        self.calls = []          # (task name, seconds asked for)

    def GPU(self, task=None, *, duration=None, size=None):  # noqa: N802 - the real name
        if task is None:
            return functools.partial(self.GPU, duration=duration, size=size)
        spaces = self

        def ask(args, kwargs):
            seconds = duration(*args, **kwargs) if callable(duration) else duration
            spaces.calls.append((task.__name__, seconds))

        if inspect.isgeneratorfunction(task):
            @functools.wraps(task)
            def generator_on_gpu(*args, **kwargs):
                ask(args, kwargs)
                steps = task(*args, **kwargs)
                while True:
                    spaces.inside = True
                    try:
                        value = next(steps)
                    except StopIteration:
                        return
                    finally:
                        spaces.inside = False
                    yield value
            return generator_on_gpu

        @functools.wraps(task)
        def on_gpu(*args, **kwargs):
            ask(args, kwargs)
            spaces.inside = True
            try:
                return task(*args, **kwargs)
            finally:
                spaces.inside = False
        return on_gpu


class ImportWatch:
    """A finder that notes every attempt to import ``spaces`` (and finds nothing)."""

    def __init__(self):
        self.attempts = 0

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "spaces":
            self.attempts += 1
        return None


@pytest.fixture
def zero_gpu(monkeypatch):
    spaces = StandInSpaces()
    monkeypatch.setitem(sys.modules, "spaces", spaces)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    return spaces


@pytest.fixture
def no_spaces_installed(monkeypatch):
    watch = ImportWatch()
    monkeypatch.delitem(sys.modules, "spaces", raising=False)
    monkeypatch.setattr(sys, "meta_path", [watch, *sys.meta_path])
    return watch


def session_state(preset):
    from explorer.app.session import Made, Model, Session
    key = ModelKey(PRESETS[preset], 123, "cpu", "float32")
    return Session(models=(Model(key, Made("built", preset)),))


# ---------------------------------------------------------------------------------------------
# The decorator
def test_off_zero_gpu_the_function_itself_comes_back_and_spaces_is_never_imported(
        monkeypatch, no_spaces_installed):
    def work(x):
        return x + 1

    for value in (None, "", "false", "0"):
        if value is None:
            monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
        else:
            monkeypatch.setenv("SPACES_ZERO_GPU", value)
        assert gpu.gpu_work(duration=gpu.forward_seconds)(work) is work
    assert no_spaces_installed.attempts == 0


@pytest.mark.parametrize("value", ["true", "True", "1", "t"])
def test_zero_gpu_is_recognised_as_spaces_itself_recognises_it(monkeypatch, value):
    monkeypatch.setenv("SPACES_ZERO_GPU", value)
    assert gpu.on_zero_gpu()


def test_on_zero_gpu_a_function_runs_inside_the_gpu_decorator(zero_gpu):
    seen = []

    @gpu.gpu_work(duration=lambda arguments: 3 * arguments["n"])
    def work(n):
        seen.append(zero_gpu.inside)
        return n

    assert work(20) == 20
    assert seen == [True] and not zero_gpu.inside
    assert zero_gpu.calls == [("work", 60)]


def test_on_zero_gpu_every_yield_of_a_generator_is_produced_inside(zero_gpu):
    seen = []

    @gpu.gpu_work(duration=lambda arguments: 30)
    def stream(n):
        for i in range(n):
            seen.append(zero_gpu.inside)
            yield i

    assert inspect.isgeneratorfunction(stream)   # Gradio streams it only if it is one
    assert list(stream(4)) == [0, 1, 2, 3]
    assert seen == [True] * 4
    assert zero_gpu.calls == [("stream", 30)]


def test_asked_durations_stay_within_zero_gpus_limits(zero_gpu):
    estimates = iter([0.2, 10 ** 9, float("nan"), "soon"])

    @gpu.gpu_work(duration=lambda arguments: next(estimates))
    def work():
        return None

    for _ in range(4):
        work()
    assert [s for _, s in zero_gpu.calls] == [gpu.MIN_SECONDS, gpu.MAX_SECONDS,
                                              gpu.DEFAULT_SECONDS, gpu.DEFAULT_SECONDS]


def test_a_request_the_estimate_cannot_read_gets_the_default_and_the_handlers_own_message(
        zero_gpu):
    @gpu.gpu_work(duration=gpu.forward_seconds)
    def run_trace(prompt, state):
        if not state:
            raise ValueError("No model yet: build one in the Build tab first.")

    with pytest.raises(ValueError, match="No model yet"):
        run_trace("hello", None)
    assert zero_gpu.calls == [("run_trace", gpu.DEFAULT_SECONDS)]


def test_zero_gpu_without_the_spaces_package_runs_plainly_and_says_so(
        monkeypatch, no_spaces_installed, caplog):
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")

    def work():
        return 1

    with caplog.at_level("WARNING", logger="gpt_explorer"):
        assert gpu.gpu_work(duration=gpu.forward_seconds)(work) is work
    assert "spaces" in caplog.text and "pip install spaces" in caplog.text


# ---------------------------------------------------------------------------------------------
# The estimates
def test_duration_grows_with_the_model_and_the_tokens_asked_for():
    tiny = session_state("teach-tiny")
    xl = types.SimpleNamespace(keys=(ModelKey(PRESETS["gpt2-xl"], 1, "cuda", "float32"),))
    prompt = "Every effort moves you"
    assert gpu.forward_seconds({"session": tiny, "prompt": prompt}) < \
        gpu.forward_seconds({"session": xl, "prompt": prompt})
    assert gpu.forward_seconds({"session": xl, "prompt": prompt}) < \
        gpu.forward_seconds({"session": xl, "prompt": prompt * 40})
    assert gpu.generate_seconds({"session": xl, "prompt": prompt, "max_new_tokens": 10}) < \
        gpu.generate_seconds({"session": xl, "prompt": prompt, "max_new_tokens": 500})
    assert gpu.build_seconds(PRESETS["teach-tiny"].to_dict()) < \
        gpu.build_seconds(PRESETS["gpt2-xl"].to_dict())


def test_a_prompt_counts_at_most_one_token_per_byte_and_at_most_the_context():
    cfg = PRESETS["gpt2-small"]
    state = types.SimpleNamespace(keys=(ModelKey(cfg, 1, "cuda", "float32"),))
    parameters = count_parameters(cfg).total
    build = gpu._build(parameters)
    # "é" is two UTF-8 bytes: up to two tokens
    assert gpu.forward_seconds({"session": state, "prompt": "é" * 10}) == \
        pytest.approx(build + gpu._forward(parameters, 20))
    assert gpu.forward_seconds({"session": state, "prompt": "x" * 50_000}) == \
        pytest.approx(build + gpu._forward(parameters, cfg.context_length))
    # Next token: the text shown so far, when longer than the prompt; no text: the context.
    assert gpu.forward_seconds({"session": state, "prompt": "ab", "output": "abcdef"}) == \
        pytest.approx(build + gpu._forward(parameters, 6))
    assert gpu.forward_seconds({"session": state}) == \
        pytest.approx(build + gpu._forward(parameters, cfg.context_length))


def test_a_handler_with_star_args_names_its_arguments_through_signature(zero_gpu):
    def build(*args, **kwargs):
        return args

    with pytest.raises(TypeError, match="signature="):
        gpu.gpu_work(duration=gpu.build_seconds)(build)
    named = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                               for name in ("n_layers", "emb_dim")])
    on_gpu = gpu.gpu_work(duration=lambda arguments: arguments["n_layers"], signature=named)(
        build)
    assert on_gpu(30, 64) == (30, 64)
    assert zero_gpu.calls == [("build", 30)]


# ---------------------------------------------------------------------------------------------
# The app's handlers: which does GPU work, and in which tab module it lives
GPU_HANDLERS = {
    "build": "explorer.app.tabs.build",
    "run_trace": "explorer.app.tabs.inside",
    "attention_views": "explorer.app.tabs.attention",
    "generate": "explorer.app.tabs.generate",
    "next_token": "explorer.app.tabs.generate",
    "logit_lens": "explorer.app.tabs.generate",
    "export_weights": "explorer.app.tabs.build",
}
TAB_MODULES = sorted(set(GPU_HANDLERS.values()))
TABS = Path(__file__).resolve().parent.parent / "explorer" / "app" / "tabs"


def reload_tabs():
    """The tab modules as a server would import them now (decorators run at import)."""
    return {name: importlib.reload(importlib.import_module(name)) for name in TAB_MODULES}


@pytest.fixture
def tabs_on_zero_gpu(zero_gpu, monkeypatch):
    try:
        yield reload_tabs()
    finally:   # the plain handlers again, for the tests that follow
        monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
        monkeypatch.delitem(sys.modules, "spaces", raising=False)
        reload_tabs()


def test_off_zero_gpu_the_handlers_are_the_plain_functions(monkeypatch, no_spaces_installed):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    tabs = reload_tabs()
    for name, module in GPU_HANDLERS.items():
        plain = getattr(tabs[module], name).__wrapped__          # under @handler
        assert not hasattr(plain, "__wrapped__"), f"{name} is wrapped off ZeroGPU"
        assert plain.__module__ == module and plain.__name__ == name
    assert no_spaces_installed.attempts == 0


def test_on_zero_gpu_every_handlers_gpu_work_runs_inside_spaces_gpu(tabs_on_zero_gpu, zero_gpu,
                                                                    monkeypatch):
    from explorer.app import shared
    tabs = tabs_on_zero_gpu
    build_tab, inside_tab = tabs["explorer.app.tabs.build"], tabs["explorer.app.tabs.inside"]
    attention_tab, generate_tab = (tabs["explorer.app.tabs.attention"],
                                   tabs["explorer.app.tabs.generate"])
    ran = []   # (what ran, whether inside the GPU decorator)

    def spy(what, fn):
        def spied(*args, **kwargs):
            ran.append((what, zero_gpu.inside))
            return fn(*args, **kwargs)
        return spied

    def spy_steps(fn):
        def steps(*args, **kwargs):
            for step in fn(*args, **kwargs):
                ran.append(("decoding step", zero_gpu.inside))
                yield step
        return steps

    monkeypatch.setattr(shared.CACHE, "get", spy("model", shared.CACHE.get))
    from explorer.app import results
    shared.RESULTS.clear()          # every trace and step computed here, none from the cache
    monkeypatch.setattr(results, "trace", spy("trace", results.trace))
    monkeypatch.setattr(results, "generate_steps", spy_steps(results.generate_steps))
    monkeypatch.setattr(generate_tab, "generate_steps", spy_steps(generate_tab.generate_steps))
    # Slow builds, so that every estimate reads the session's model: teach-tiny's build alone
    # asks for about 80 s (an estimate that could not read it would ask for the default 60 s).
    tiny = PRESETS["teach-tiny"]
    monkeypatch.setattr(gpu, "BUILD_PARAMETERS_PER_SECOND", count_parameters(tiny).total / 70)

    for name, module in GPU_HANDLERS.items():
        assert hasattr(getattr(tabs[module], name).__wrapped__, "__wrapped__"), name

    def no_progress(*args, **kwargs):
        return None

    from explorer.app.pickers import HIST_PAIRS
    from explorer.app.session import Session
    # (each handler returns the session: ZeroGPU's worker changes a copy of it)
    state = build_tab.build("teach-tiny", *tiny.to_dict().values(), 123, "cpu", "float32",
                            session=Session(), progress=no_progress)["session"]
    prompt = "Every effort moves you"
    pair = next(iter(HIST_PAIRS))
    state = inside_tab.run_trace(prompt, state, 0, pair, "ln1_out", "std")["session"]
    state = attention_tab.attention_views(state, 1, "mean")["session"]
    updates = list(generate_tab.generate(prompt, 6, "greedy", 1.0, 50, 123, False, state))
    assert updates and prompt in updates[-1]["gen_output"]
    state = updates[-1]["session"]
    state = generate_tab.next_token(prompt, updates[-1]["gen_output"], "greedy", 1.0, 50, 123,
                                    state)["session"]
    generate_tab.logit_lens(prompt, state)
    files = build_tab.export_weights(state, False)["export_files"]
    assert sorted(Path(f).name for f in files) == ["config.json", "model.safetensors"]

    assert [name for name, _ in zero_gpu.calls] == list(GPU_HANDLERS)
    assert all(80 <= seconds <= gpu.MAX_SECONDS for _, seconds in zero_gpu.calls), zero_gpu.calls
    assert [what for what, _ in ran].count("decoding step") == 6 + 1
    assert {"model", "trace", "decoding step"} <= {what for what, _ in ran}
    assert all(inside for _, inside in ran), [what for what, inside in ran if not inside]


def test_every_handler_that_uses_a_model_is_marked_as_gpu_work():
    """A new handler (training, say) that reaches the model, itself or through a function of
    its module, must say so to ZeroGPU."""
    reaches = {"models_of", "model_a", "CACHE.get", "CACHE.hold", "shared.LAB.start",
               "shared.LAB.resume", "_trained"}       # the last three: training
    unmarked = []
    for path in sorted(TABS.glob("*.py")):
        tree = ast.parse(path.read_text())
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        # a handler decorated by assignment: build = handler(...)(gpu.gpu_work(...)(build))
        wrapped = {target.id: ast.unparse(node.value) for node in tree.body
                   if isinstance(node, ast.Assign) for target in node.targets
                   if isinstance(target, ast.Name)}

        def calls_of(node):
            return {ast.unparse(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)}

        def decorators(name):
            return [ast.unparse(d) for d in functions[name].decorator_list] + [
                wrapped.get(name, "")]

        def on_gpu(name):
            return any("gpu_work" in d for d in decorators(name))

        def uses_model(name, seen=()):
            """Whether ``name`` reaches a model outside a function that is GPU work itself."""
            calls = calls_of(functions[name])
            return bool(calls & reaches) or any(
                uses_model(c, (*seen, name)) for c in calls
                if c in functions and c not in seen and not on_gpu(c))

        for name in functions:
            if any("handler" in d for d in decorators(name)) and uses_model(name) \
                    and not on_gpu(name):
                unmarked.append(f"{path.name}:{name}")
    assert unmarked == []


def test_the_walk_asks_zero_gpu_only_when_it_must_trace(zero_gpu, monkeypatch):
    """A click on a stage of the diagram is served from a trace when the session has one of
    the prompt (no GPU asked for: ZeroGPU's quota is minutes a day); only a prompt not traced
    yet is traced, inside spaces.GPU."""
    import gradio as gr
    from explorer.probes import trace
    walk = importlib.reload(importlib.import_module("explorer.app.tabs.walk"))
    ran = []   # whether each trace ran inside the GPU decorator

    def spied(*args, **kwargs):
        ran.append(zero_gpu.inside)
        return trace(*args, **kwargs)

    from explorer.app import results, shared
    try:
        shared.RESULTS.clear()
        monkeypatch.setattr(results, "trace", spied)
        state = session_state("teach-tiny")
        prompt = "Every effort moves you"
        card = walk.show_stage("attention", 1, prompt, state)["walk_card"]
        assert "Masked multi-head attention" in card
        assert ran == [True] and [name for name, _ in zero_gpu.calls] == ["_walk_trace"]
        walk.show_stage("feed_forward", 0, prompt, state)             # the same prompt
        select = gr.SelectData(None, {"value": "final_norm", "index": 7})
        walk.stage_clicked(0, prompt, state, select)
        assert ran == [True] and len(zero_gpu.calls) == 1
        walk.show_stage("norm1", 0, "another prompt", state)           # traced again
        assert ran == [True, True] and len(zero_gpu.calls) == 2
    finally:
        monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
        monkeypatch.delitem(sys.modules, "spaces", raising=False)
        importlib.reload(walk)
