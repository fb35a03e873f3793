"""Security defaults: loopback only and no share link unless asked, no file outside the app
reachable through the server, two upload inputs (a checkpoint, limited to the memory budget, and the Train tab's .txt), a gradio with
the published advisories fixed, no pickle anywhere, and a memory budget that is derived from
the machine, overridable and checked."""
import ast
import http.client
import os
import re
import urllib.parse
from pathlib import Path

import gradio as gr
import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from explorer.runtime import cache, guard, memory
from explorer.app import server
from explorer.runtime.memory import BUDGET_ENV, BUDGET_SHARE_OF_RAM, default_budget_bytes
from explorer.app.live_figure import PLOTLY_JS
from explorer.app.server import create_demo, launch_options

ROOT = Path(__file__).resolve().parent.parent
MIN_GRADIO = Version("6.22")


# ---------------------------------------------------------------------------------------------
# Where the server listens, and no share link
def test_binds_loopback_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    assert launch_options()["server_name"] == "127.0.0.1"
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    assert launch_options()["server_name"] == "0.0.0.0"
    assert launch_options(host="10.1.2.3")["server_name"] == "10.1.2.3"  # --host wins


def test_no_share_link_by_default_even_where_gradio_would_make_one(monkeypatch):
    # share=None would let GRADIO_SHARE=True (or Colab) open a public tunnel.
    monkeypatch.setenv("GRADIO_SHARE", "True")
    assert launch_options()["share"] is False
    assert launch_options(share=True)["share"] is True


class _FakeDemo:
    def __init__(self):
        self.options = None

    def launch(self, **options):
        self.options = options
        return None, "http://127.0.0.1:7860/", None

    def block_thread(self):
        pass


@pytest.mark.parametrize("argv, host, share", [
    ([], "127.0.0.1", False),
    (["--host", "0.0.0.0"], "0.0.0.0", False),
    (["--share"], "127.0.0.1", True),
])
def test_command_line_options(monkeypatch, capsys, argv, host, share):
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    fake = _FakeDemo()
    monkeypatch.setattr(server, "create_demo", lambda: fake)
    server.main(argv)
    assert fake.options["server_name"] == host and fake.options["share"] is share
    # Gradio's own start-up lines (which suggest share=True) are off; ours names --share
    assert fake.options["quiet"] is True
    assert "--share" in capsys.readouterr().out


def test_uploads_are_limited_to_the_memory_budget_or_the_setting(monkeypatch):
    from gradio.utils import _parse_file_size
    from explorer.app.shared import CACHE

    from explorer.runtime.training.setup import MAX_CORPUS_BYTES

    monkeypatch.delenv(guard.UPLOAD_ENV, raising=False)
    assert _parse_file_size(launch_options()["max_file_size"]) == CACHE.budget_bytes
    # room for the largest text the lab trains on (a larger one gets the lab's message)
    assert MAX_CORPUS_BYTES <= CACHE.budget_bytes
    monkeypatch.setenv(guard.UPLOAD_ENV, "200")
    assert _parse_file_size(launch_options()["max_file_size"]) == min(200 * 1024 ** 2,
                                                                      CACHE.budget_bytes)
    monkeypatch.setenv(guard.UPLOAD_ENV, str(10 ** 9))        # never above the budget
    assert _parse_file_size(launch_options()["max_file_size"]) == CACHE.budget_bytes
    for bad in ("lots", "-1", "0", "nan"):
        monkeypatch.setenv(guard.UPLOAD_ENV, bad)
        with pytest.raises(ValueError, match=guard.UPLOAD_ENV):
            launch_options()


def test_the_only_upload_inputs_are_the_checkpoint_and_the_training_text():
    demo = create_demo()
    config = demo.get_config_file()
    components = {c["id"]: c for c in config["components"]}
    uploads = {"file", "uploadbutton", "image", "audio", "video", "model3d", "gallery",
               "imageeditor", "multimodaltextbox", "simpleimage", "imageslider", "annotatedimage"}
    inputs = {i for dep in config["dependencies"] for i in dep["inputs"]
              if components[i]["type"] in uploads}
    by_id = {components[i]["props"].get("elem_id"): components[i] for i in inputs}
    assert sorted(by_id) == ["train_upload", "weights_upload"]
    assert by_id["train_upload"]["props"]["file_types"] == [".txt"]
    assert set(by_id["weights_upload"]["props"]["file_types"]) == {".safetensors", ".pth", ".pt",
                                                                   ".json"}
    # nothing is published as a static path but Gradio's own icons and the one plotly.js file
    # that the Train tab's figures use (explorer/app/live_figure.py)
    gradio_package = Path(gr.__file__).resolve().parent
    published = gr.data_classes._StaticFiles.all_paths
    assert [p for p in published if not p.is_relative_to(gradio_package)] == [
        Path(PLOTLY_JS).resolve()]


# ---------------------------------------------------------------------------------------------
# Nothing outside the app's own assets can be fetched
UPLOAD_LIMIT_MB = 1   # for the server below: an upload over it must be refused


@pytest.fixture(scope="module")
def app_address():
    demo = create_demo()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(guard.UPLOAD_ENV, str(UPLOAD_LIMIT_MB))
        options = {**launch_options(host="127.0.0.1"), "server_port": None}
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **options)
    parsed = urllib.parse.urlparse(url)
    yield parsed.hostname, parsed.port
    demo.close()


def fetch(address, path, method="GET", body=None, headers=None):
    """A raw request: the path goes out exactly as written (no client-side normalising)."""
    conn = http.client.HTTPConnection(*address, timeout=15)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


REPO_FILE = ROOT / "explorer" / "cache.py"
SECRET_MARKERS = (b"root:x:0:0", b"root:", b"BUDGET_SHARE_OF_RAM", b"PATH=", b"HOME=")


def _targets():
    passwd, repo = "/etc/passwd", str(REPO_FILE)
    q = urllib.parse.quote
    temp = os.environ.get("GRADIO_TEMP_DIR", "/tmp/gradio")
    return [
        f"/gradio_api/file={passwd}",
        f"/gradio_api/file={repo}",
        f"/gradio_api/file={ROOT / 'README.md'}",
        "/gradio_api/file=/proc/self/environ",
        "/gradio_api/file=../../../../../../etc/passwd",
        "/gradio_api/file=..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/gradio_api/file=%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/gradio_api/file=%252e%252e%252f%252e%252e%252fetc%252fpasswd",
        f"/gradio_api/file={q(passwd, safe='')}",
        f"/gradio_api/file={temp}/../../../../etc/passwd",
        f"/gradio_api/file={temp}/..%2f..%2f..%2f..%2fetc%2fpasswd",
        f"/gradio_api/file=file://{passwd}",
        f"/gradio_api/file/{passwd}",
        f"/gradio_api/file/..%2f..%2f..%2f..%2fetc%2fpasswd",
        f"/file={passwd}",
        f"/file={repo}",
        "/static/../../../../../../etc/passwd",
        "/static/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/assets/../../../../../../etc/passwd",
        "/assets/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        f"/gradio_api/proxy=file://{passwd}",
        f"/gradio_api/proxy=http://127.0.0.1:1/{passwd}",
        # beside the one published file, and from it
        f"/gradio_api/file={Path(PLOTLY_JS).parent / 'widgetbundle.js'}",
        f"/gradio_api/file={Path(PLOTLY_JS).parent.parent / '__init__.py'}",
        f"/gradio_api/file={PLOTLY_JS}/../../__init__.py",
        f"/gradio_api/file={PLOTLY_JS}/..%2f..%2f__init__.py",
    ]


@pytest.mark.parametrize("path", _targets())
def test_no_file_outside_the_app_is_served(app_address, path):
    status, body = fetch(app_address, path)
    assert not any(marker in body for marker in SECRET_MARKERS), f"{path} leaked a file"
    assert status in (400, 403, 404, 405, 422), f"{path} answered {status}"


def test_the_published_plotly_js_is_served(app_address):
    status, body = fetch(app_address, f"/gradio_api/file={PLOTLY_JS}")
    assert status == 200 and body == Path(PLOTLY_JS).read_bytes()


def test_an_upload_over_the_limit_is_refused(app_address):
    boundary = "gptexplorerboundary"
    payload = b"x" * ((UPLOAD_LIMIT_MB + 1) * 1024 ** 2)
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
            f"filename=\"big.txt\"\r\nContent-Type: text/plain\r\n\r\n").encode() + payload + (
        f"\r\n--{boundary}--\r\n").encode()
    status, answer = fetch(app_address, "/gradio_api/upload", "POST", body,
                           {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 413, (status, answer[:200])


# ---------------------------------------------------------------------------------------------
# Dependencies and code
def _requirement(name):
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(rf"^{name}\s*(\[[^\]]*\])?\s*([<>=!~].*)?$", line, re.I)
        if match:
            return SpecifierSet(match.group(2) or "")
    raise AssertionError(f"{name} is not in requirements.txt")


def test_gradio_is_pinned_to_a_release_with_the_advisories_fixed():
    spec = _requirement("gradio")
    assert str(spec), "gradio must have a version constraint"
    for too_old in ("6.21.99", "6.21.0", "6.6.0", "6.0.0", "5.50.0", "4.44.1"):
        assert Version(too_old) not in spec, f"requirements.txt allows gradio {too_old}"
    installed = Version(gr.__version__)
    assert installed >= MIN_GRADIO and installed in spec


def _python_sources():
    files = sorted((ROOT / "explorer").rglob("*.py")) + [ROOT / "app.py"]
    return [f for f in files if f.is_file()]


PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "joblib", "shelve", "marshal",
                  "cloudpickle"}


def test_nothing_unpickles():
    """Weights may arrive later as safetensors only: no pickle module, and torch.load (if
    ever used) with weights_only=True, numpy.load without allow_pickle."""
    problems = []
    for path in _python_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                names = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {(node.module or "").split(".")[0]}
            else:
                names = set()
            if names & PICKLE_MODULES:
                problems.append(f"{where} imports {names & PICKLE_MODULES}")
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                kwargs = {k.arg: k.value for k in node.keywords}
                if name.endswith(("torch.load", "torch.serialization.load")):
                    value = kwargs.get("weights_only")
                    if not (isinstance(value, ast.Constant) and value.value is True):
                        problems.append(f"{where} {name}() without weights_only=True")
                if name.endswith(("np.load", "numpy.load")):
                    value = kwargs.get("allow_pickle")
                    if value is not None and not (isinstance(value, ast.Constant)
                                                  and value.value is False):
                        problems.append(f"{where} {name}(allow_pickle=...)")
                if name.endswith(("read_pickle", "pickle.load", "pickle.loads")):
                    problems.append(f"{where} {name}()")
    assert problems == []


# ---------------------------------------------------------------------------------------------
# The memory budget
def test_default_budget_is_a_share_of_the_machines_memory(monkeypatch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory.physical_memory_bytes() == ram
    assert default_budget_bytes() == int(ram * BUDGET_SHARE_OF_RAM)
    assert 0 < default_budget_bytes() < ram


@pytest.mark.parametrize("value, mb", [("512", 512), (" 2048 ", 2048), ("0.5", 0.5),
                                       ("", None)])
def test_budget_environment_variable_overrides_it(monkeypatch, value, mb):
    monkeypatch.setenv(BUDGET_ENV, value)
    expected = int(mb * 1024 ** 2) if mb is not None else int(
        memory.physical_memory_bytes() * BUDGET_SHARE_OF_RAM)
    assert default_budget_bytes() == expected
    assert cache.ModelCache().budget_bytes == expected


@pytest.mark.parametrize("value", ["lots", "512MB", "-5", "0", "nan", "inf", "1e400"])
def test_a_bad_budget_value_is_refused_clearly(monkeypatch, value):
    monkeypatch.setenv(BUDGET_ENV, value)
    with pytest.raises(ValueError, match=rf"{BUDGET_ENV} must be a (positive )?number of MB"):
        default_budget_bytes()


def test_the_app_does_not_start_with_a_bad_budget(monkeypatch):
    """explorer.app.shared makes its shared cache at import (CACHE = ModelCache()), so a bad value
    stops the app at start, with this message rather than later with an odd one."""
    monkeypatch.setenv(BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match=rf"{BUDGET_ENV} must be a number of MB \(got 'lots'\)"):
        cache.ModelCache()


# ---------------------------------------------------------------------------------------------
# The app's launch options (app.py, a Space, the tests) carry the edge: host check, monitoring off


def test_the_apps_launch_checks_the_host_and_hides_monitoring():
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True,
                            **{**launch_options(host="127.0.0.1"), "server_port": None})
    address = urllib.parse.urlparse(url)
    address = (address.hostname, address.port)
    try:
        assert fetch(address, "/config")[0] == 200
        status, body = fetch(address, "/config", headers={"Host": f"evil.example:{address[1]}"})
        assert status == 400 and b"does not answer to the host" in body
        assert fetch(address, "/monitoring/summary")[0] == 403
        assert fetch(address, "/gradio_api/run/trace", "POST", b'{"data": []}',
                     {"Content-Type": "application/json"})[0] == 404
    finally:
        demo.close()


@pytest.mark.parametrize("env, host, allowed", [
    ({}, "localhost", True),
    ({}, "127.0.0.2", True),                        # any loopback address
    ({}, "evil.example", False),
    ({}, "", False),                                # no Host header at all
    ({"SPACE_HOST": "someone-gpt-explorer.hf.space"}, "someone-gpt-explorer.hf.space", True),
    ({"SPACE_HOST": "someone-gpt-explorer.hf.space"}, "other.hf.space", False),
    ({"GPT_EXPLORER_ALLOWED_HOSTS": "explorer.example.org, lab.local"}, "lab.local", True),
    ({"GPT_EXPLORER_ALLOWED_HOSTS": "explorer.example.org"}, "evil.example", False),
    ({"GPT_EXPLORER_ALLOWED_HOSTS": "*"}, "evil.example", True),
])
def test_allowed_hosts(monkeypatch, env, host, allowed):
    from explorer.runtime.guard import HostCheck, allowed_hosts

    for name in ("SPACE_HOST", "GPT_EXPLORER_ALLOWED_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert HostCheck(None, allowed_hosts("127.0.0.1")).allows(host) is allowed


def test_the_bound_address_and_a_share_link_are_allowed(monkeypatch):
    from explorer.runtime.guard import HostCheck, allowed_hosts

    monkeypatch.delenv("GPT_EXPLORER_ALLOWED_HOSTS", raising=False)
    assert HostCheck(None, allowed_hosts("10.1.2.3")).allows("10.1.2.3")
    assert HostCheck(None, allowed_hosts("127.0.0.1", share=True)).allows("abc.gradio.live")
    assert not HostCheck(None, allowed_hosts("127.0.0.1")).allows("abc.gradio.live")


@pytest.mark.parametrize("host", ["10.1.2.3", "192.168.0.7", "::ffff:10.0.0.1", "203.0.113.5"])
def test_an_ip_address_as_host_is_allowed_since_it_cannot_be_rebound(monkeypatch, host):
    # A Space's or a load balancer's health check may name the pod by its address; DNS
    # rebinding needs a name, so an address is safe to answer.
    from explorer.runtime.guard import HostCheck, allowed_hosts

    monkeypatch.delenv("GPT_EXPLORER_ALLOWED_HOSTS", raising=False)
    assert HostCheck(None, allowed_hosts("0.0.0.0")).allows(host)
    assert not HostCheck(None, allowed_hosts("0.0.0.0")).allows("rebound.example")


@pytest.mark.parametrize("value, enabled", [(None, False), ("1", True), ("0", False)])
def test_monitoring_is_off_unless_the_operator_asks(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("GPT_EXPLORER_MONITORING", raising=False)
    else:
        monkeypatch.setenv("GPT_EXPLORER_MONITORING", value)
    options = launch_options()
    assert options["enable_monitoring"] is enabled
    names = [m.cls.__name__ for m in options["app_kwargs"]["middleware"]]
    assert names == ["HostCheck", "RequestCheck"]


# ---------------------------------------------------------------------------------------------
# A path on the server ("from a file"): only where the server listens on the loopback alone,
# unless the operator turns it on
@pytest.mark.parametrize("options, env, allowed", [
    ({"server_name": "127.0.0.1"}, {}, True),
    ({"server_name": "localhost"}, {}, True),
    ({"server_name": "0.0.0.0"}, {}, False),                       # --host 0.0.0.0
    ({}, {"GRADIO_SERVER_NAME": "0.0.0.0"}, False),                # the Docker image
    ({"server_name": "10.1.2.3"}, {}, False),
    ({"server_name": "127.0.0.1", "share": True}, {}, False),      # --share
    ({"server_name": "0.0.0.0"}, {"GPT_EXPLORER_SERVER_PATHS": "1"}, True),   # the operator's
    ({"server_name": "127.0.0.1"}, {"GPT_EXPLORER_SERVER_PATHS": "0"}, False),
    ({"server_name": "127.0.0.1"}, {"SPACE_ID": "someone/gpt-explorer"}, False),
])
def test_server_paths_only_on_the_loopback_unless_the_operator_says(monkeypatch, options, env,
                                                                    allowed):
    from explorer.runtime import guard, server_paths

    for name in ("GRADIO_SERVER_NAME", "GRADIO_SHARE", "GPT_EXPLORER_SERVER_PATHS", "SPACE_ID",
                 "SYSTEM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(guard, "_reach", {"beyond_this_machine": False})
    launch_options(host=options.get("server_name"), share=options.get("share", False))
    assert server_paths.server_paths_allowed() is allowed


def test_the_docker_image_listens_beyond_the_loopback_so_server_paths_are_off():
    """The Dockerfile binds 0.0.0.0 and does not turn server paths on."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "GRADIO_SERVER_NAME=0.0.0.0" in dockerfile
    assert "GPT_EXPLORER_SERVER_PATHS" not in dockerfile


def test_a_server_path_refusal_says_the_same_whatever_the_file(tmp_path, monkeypatch):
    """Missing, a folder, unreadable, another kind of file, a lying header: one message."""
    from explorer.runtime.server_paths import SERVER_PATH_REFUSED
    from explorer.app import shared
    from explorer.runtime import server_paths
    from explorer.book.errors import ExplorerError

    (tmp_path / "text.safetensors").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "folder.safetensors").mkdir()
    (tmp_path / "empty.pth").write_bytes(b"")
    paths = [tmp_path / "missing.safetensors", tmp_path / "text.safetensors",
             tmp_path / "folder.safetensors", tmp_path / "empty.pth", "/etc/passwd",
             "/proc/self/mem", "/" + "a" * 5000 + ".safetensors"]
    messages = set()
    for path in paths:
        with pytest.raises(ExplorerError) as refused:
            server_paths.server_checkpoint(str(path), "float32", shared.CACHE.budget_bytes)
        messages.add(str(refused.value))
    assert messages == {SERVER_PATH_REFUSED.text}
