"""The weights store on disk after a run of distinct uploads: every checkpoint a visitor loads
is converted once into the store (``explorer.runtime.store``), so its size is what a server's
disk must hold. Uploads are ``n`` teach-tiny checkpoints with other seeds (about 26 MB each,
the size of the issue's ~19 MB uploads), loaded as the Build tab loads an upload.

    python bench/weights_store.py                      # 10 uploads, the limit 64 MB and none
    python bench/weights_store.py --uploads 10 --limit-mb 64
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import _common  # noqa: F401 - the repository root on sys.path

from explorer.book.config import PRESETS
from explorer.runtime import export, loading
from explorer.runtime import store as weights_store
from explorer.runtime.build import build_model
from explorer.runtime.cache import ModelCache

MB = 1024 ** 2


def store_after(uploads: list[Path], limit_mb: float | None) -> tuple[float, int]:
    """(store MB, files kept) after loading every upload once, in a fresh store."""
    with tempfile.TemporaryDirectory() as store:
        os.environ[weights_store.STORE_ENV] = store
        if limit_mb is None:
            os.environ[weights_store.STORE_LIMIT_ENV] = str(10 ** 9)      # no bound, as before
        else:
            os.environ[weights_store.STORE_LIMIT_ENV] = str(limit_mb)
        peak = 0
        for path in uploads:
            loading.load_file(path, cache=ModelCache(budget_bytes=1024 * MB))
            peak = max(peak, weights_store.store_bytes())
        return peak / MB, len(list(Path(store).glob(weights_store.STORED)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--limit-mb", type=float, default=64.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        uploads = []
        for seed in range(args.uploads):
            model = build_model(PRESETS["teach-tiny"], seed=seed, device="cpu")
            uploads.append(export.export_model(model, Path(folder) / str(seed))[0])
        size = uploads[0].stat().st_size / MB
        print(f"{args.uploads} distinct uploads of {size:.1f} MB each")
        for limit in (None, args.limit_mb):
            peak, kept = store_after(uploads, limit)
            what = "no limit (before)" if limit is None else f"limit {limit:g} MB (after)"
            print(f"  {what:<24} largest store {peak:7.1f} MB, {kept} file(s) kept")


if __name__ == "__main__":
    main()
