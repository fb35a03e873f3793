"""Test-wide environment, set at import time so it is in place before gradio is imported."""

import atexit
import os
import shutil
import tempfile

# No usage reports to Gradio's servers (there is no network in CI anyway).
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

# Uploaded/cached files go to a throwaway dir, not the user's ~/.gradio or /tmp/gradio.
_gradio_tmp = tempfile.mkdtemp(prefix="gpt-explorer-tests-gradio-")
os.environ["GRADIO_TEMP_DIR"] = _gradio_tmp
atexit.register(shutil.rmtree, _gradio_tmp, ignore_errors=True)

# Checkpoints converted by weight-loading tests go to a throwaway store, not ~/.cache.
_weights_store = tempfile.mkdtemp(prefix="gpt-explorer-tests-weights-")
os.environ["GPT_EXPLORER_WEIGHTS"] = _weights_store
atexit.register(shutil.rmtree, _weights_store, ignore_errors=True)

# A proxy in the environment must not intercept requests to the local test server.
for _var in ("NO_PROXY", "no_proxy"):
    _hosts = [h for h in os.environ.get(_var, "").split(",") if h]
    os.environ[_var] = ",".join(dict.fromkeys(["127.0.0.1", "localhost", *_hosts]))

# explorer sets its OpenMP settings (waiting threads sleep) before torch is first imported.
import explorer  # noqa: E402,F401

import pytest  # noqa: E402

from explorer.native.library import NativeLibrary  # noqa: E402


@pytest.fixture
def without_compiler(monkeypatch, tmp_path):
    """As on a machine without a working C compiler: ``without_compiler(module)`` gives that
    kernel module a fresh, unbuilt library whose build will use ``compiler`` and an empty cache
    folder (``tmp_path``)."""
    def apply(module, compiler="no-such-compiler-here"):
        monkeypatch.setenv("GPT_EXPLORER_NATIVE", "1")   # switched on, even in a run with 0
        monkeypatch.setenv("CC", compiler)
        monkeypatch.setenv("GPT_EXPLORER_CACHE", str(tmp_path))
        old = module._native
        monkeypatch.setattr(module, "_native", NativeLibrary(old.source, module._declare,
                                                             old.without, old.libraries))
    return apply


@pytest.fixture(scope="module")
def app_url():
    """The app on the loopback, one per test module that asks (tests/browser has its own,
    with the page's theme)."""
    from local_client import launched
    with launched() as url:
        yield url
