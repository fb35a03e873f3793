"""Small C kernels, compiled once per machine with its own C compiler and loaded with ctypes.

Nothing to install: the first use compiles the source (``$CC``, else ``cc``) into a cache folder
(``$GPT_EXPLORER_CACHE``, else ``~/.cache/gpt-explorer``) under a name that covers the source,
the compiler, the flags and this CPU, and later uses load it. Where there is no working
compiler, or ``GPT_EXPLORER_NATIVE=0``, ``load()`` logs one line and returns None, and the
caller uses PyTorch instead. ``GPT_EXPLORER_NATIVE_SANITIZE=1`` builds with AddressSanitizer and
UBSan (CI runs the equivalence tests so; the process must preload libasan).
ctypes releases the GIL for the duration of each call.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import logging
import threading
from pathlib import Path
from typing import Callable

# -march=native: built for this CPU (the cache key covers it). Float sums may be reordered so
# that loops vectorise; inf and NaN keep their meaning. Unrolled loops keep several partial
# sums, so a reduction is not held up by the latency of each addition (statistics 1.35 -> 1.05
# ns a value, a trace's attention weights 7.1 -> 3.5 ms).
FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-signed-zeros",
         "-fno-trapping-math", "-fassociative-math", "-funroll-loops",
         "-fvariable-expansion-in-unroller"]


SWITCH_ENV = "GPT_EXPLORER_NATIVE"
SANITIZE_ENV = "GPT_EXPLORER_NATIVE_SANITIZE"
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                  "-fno-omit-frame-pointer", "-g"]
log = logging.getLogger("explorer.native")


def switched_on() -> bool:
    """``GPT_EXPLORER_NATIVE``: 0 turns the C kernels off, 1 (or unset) leaves them on wherever
    they build. Any other value turns them off, with one log line saying so: PyTorch computes
    the same numbers, so a doubtful switch must not run C code that was not asked for."""
    return _switch_value(os.environ.get(SWITCH_ENV, "1").strip())


@functools.lru_cache(maxsize=None)       # one line per value, not one per library
def _switch_value(value: str) -> bool:
    if value not in ("0", "1", ""):
        log.warning("%s=%r is neither 0 nor 1; the C kernels stay off (PyTorch computes the "
                    "same numbers).", SWITCH_ENV, value)
    return value in ("1", "")


def build_flags() -> list[str]:
    return FLAGS + (SANITIZE_FLAGS if os.environ.get(SANITIZE_ENV) == "1" else [])


def cache_dir() -> Path:
    """The explorer's cache folder (compiled kernels here, converted weights in the store):
    ``$GPT_EXPLORER_CACHE``, else ``gpt-explorer`` in ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    return Path(os.environ.get("GPT_EXPLORER_CACHE")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "gpt-explorer")


class NativeLibrary:
    """One C source file, built and loaded on first use (thread-safe, at most once)."""

    def __init__(self, source: Path, declare: Callable[[ctypes.CDLL], None], without: str,
                 libraries: tuple[str, ...] = ()):
        self.source = source
        self.declare = declare        # sets argtypes/restype of the functions
        self.without = without        # what happens without it, for the warning
        self.libraries = libraries    # e.g. ("-pthread",)
        self._lock = threading.Lock()
        self._library: ctypes.CDLL | None = None
        self._tried = False
        self._failed = False
        self._said: set[str] = set()  # reasons already logged by note()

    def load(self) -> ctypes.CDLL | None:
        if self._tried:
            return self._library
        with self._lock:
            if not self._tried:
                if not switched_on():
                    log.info("%s is off (%s=0); %s.", self.source.name, SWITCH_ENV,
                             self.without)
                else:
                    try:
                        library = ctypes.CDLL(str(self._build()))
                        self.declare(library)
                        self._library = library
                    except Exception as exc:   # any failure: PyTorch takes over
                        log.warning("%s could not be built or loaded (%s); %s.",
                                    self.source.name, exc, self.without)
                self._tried = True
        return self._library

    def disable(self, reason: str) -> None:
        """After a call into the library failed: PyTorch from now on, said once."""
        with self._lock:
            if not self._failed:
                log.warning("%s failed (%s); %s.", self.source.name, reason, self.without)
            self._library, self._tried, self._failed = None, True, True

    def note(self, reason: str) -> None:
        """A call the library does not take (a model it does not know, say), while it keeps
        serving everything else: logged once per reason, not once per call."""
        with self._lock:
            if reason in self._said:
                return
            self._said.add(reason)
        log.warning("%s: %s; PyTorch computes it instead.", self.source.name, reason)

    def _build(self) -> Path:
        compiler = os.environ.get("CC") or "cc"
        if shutil.which(compiler) is None:
            raise OSError(f"no C compiler ({compiler!r}) found")
        flags = build_flags()
        command = [*flags, *self.libraries]
        key = hashlib.sha256("\0".join([self.source.read_text(), compiler, *command,
                                        _cpu_signature()]).encode()).hexdigest()[:16]
        target = cache_dir() / f"{self.source.stem}-{key}.so"
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        # Build beside the target, then rename: a concurrent build or reader never sees half a
        # file.
        fd, partial = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            subprocess.run([compiler, *flags, "-o", partial, str(self.source), "-lm",
                            *self.libraries], check=True, capture_output=True, text=True,
                           timeout=120)
            os.replace(partial, target)
        except subprocess.CalledProcessError as exc:
            raise OSError(f"{compiler} failed: {exc.stderr.strip()[:300]}") from None
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        return target


def _cpu_signature() -> str:
    """What -march=native compiles for: a library built on one CPU must never be loaded on
    another (a shared cache folder would otherwise crash the app with an illegal
    instruction)."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line for line in info if line.startswith(("model name", "flags", "Features"))]
    except OSError:
        lines = []
    return "\n".join([platform.machine(), platform.processor(), *dict.fromkeys(lines)])
