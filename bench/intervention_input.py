"""Long interventions typed into the Knock out tab (issue 32, item 6): how long the answer
takes and how much memory the refusal costs.

Each case runs the tab's own handler (``add_part``: Add, or ``intervene``: Intervene) on a
teach-tiny session, in a fresh process, so that its peak RSS (VmHWM) is its own; then again
under ``tracemalloc`` for the peak of Python's allocations. Cases:

- ``add 20k heads (box)``: the interventions box holds 20,000 parts ``zero trf_blocks[0].att
  head h`` with distinct h, and Add appends one more (the merging of heads on one block).
- ``add 20k blocks (box)``: 20,000 distinct blocks ``zero trf_blocks[b].ff`` (the check of
  parts that exclude each other).
- ``intervene 1M heads``: one part with a million heads, ``zero trf_blocks[0].att heads
  0,1,…,999999`` (6.9 MB of text).
- ``add 1M heads (heads box)``: the same million heads typed in the builder's heads box.
- ``add 2k heads (box)``, ``add 15k heads (heads box)``: the most of each that the limits
  (``explorer.probes.interventions``) let through, read, merged and checked.
- ``merge 20k heads / blocks (Python)``: ``Interventions`` of 20,000 ``Intervention`` objects
  (the Python API has no limit on them): heads of one block, and distinct blocks.

Run from the repository root: ``python bench/intervention_input.py`` (~1 min after the fix;
the quadratic code took minutes: ``--timeout`` bounds each case).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import ROOT

CASES = ("add 20k heads (box)", "add 20k blocks (box)", "intervene 1M heads",
         "add 1M heads (heads box)", "add 2k heads (box)", "add 15k heads (heads box)",
         "merge 20k heads (Python)", "merge 20k blocks (Python)")


def _call(case, session):
    """The case's call, ready to run (its arguments made before the measurement)."""
    from explorer.app.tabs import knockout
    from explorer.probes.interventions import Intervention, Interventions

    add, intervene = knockout.add_part.__wrapped__, knockout.intervene.__wrapped__
    if case == "add 20k heads (box)":
        spec = "; ".join(f"zero trf_blocks[0].att head {h}" for h in range(20_000))
        return lambda: add(spec, "zero_heads", 0, False, "0", session)
    if case == "add 20k blocks (box)":
        spec = "; ".join(f"zero trf_blocks[{b}].ff" for b in range(20_000))
        return lambda: add(spec, "zero_heads", 0, False, "0", session)
    if case == "intervene 1M heads":
        spec = "zero trf_blocks[0].att heads " + ",".join(map(str, range(10 ** 6)))
        return lambda: intervene(spec, session)
    if case == "add 1M heads (heads box)":
        heads = ",".join(map(str, range(10 ** 6)))
        return lambda: add("", "zero_heads", 0, False, heads, session)
    if case == "add 2k heads (box)":           # the most parts the box takes
        spec = "; ".join(f"zero trf_blocks[0].att head {h}" for h in range(2_000))
        return lambda: add(spec, "zero_heads", 0, False, "0", session)
    if case == "add 15k heads (heads box)":    # about as many as 100,000 characters hold
        heads = ",".join(map(str, range(15_000)))
        return lambda: add("", "zero_heads", 0, False, heads, session)
    if case == "merge 20k heads (Python)":
        items = [Intervention("zero_heads", 0, (h,)) for h in range(20_000)]
        return lambda: {"knock_spec": f"{len(Interventions(items)[0].heads)} heads merged"}
    items = [Intervention("zero_ff", b) for b in range(20_000)]
    return lambda: {"knock_spec": f"{len(Interventions(items))} blocks"}


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def run_case(case, traced):
    """In this (fresh) process: the case's call once; prints one JSON line."""
    import tracemalloc

    from explorer.app.session import Made, Model, Session
    from explorer.app.tabs import knockout
    from explorer.book.config import PRESETS
    from explorer.runtime.sources import ModelKey

    key = ModelKey(PRESETS["teach-tiny"], 123, "cpu", "float32")
    session = Session(models=(Model(key, Made("built", "teach-tiny")),))
    knockout.add_part.__wrapped__("", "zero_heads", 0, False, "0", session)     # warm
    call = _call(case, session)
    with open("/proc/self/clear_refs", "w") as f:    # VmHWM from here (not the arguments')
        f.write("5")
    rss_before = _status("VmRSS")
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    try:
        out = call()
        answer = "result: " + str(out.get("knock_spec", out.get("status", "")))[:90]
    except Exception as exc:  # noqa: BLE001 - the answer is the figure
        answer = f"{type(exc).__name__}: {str(exc)[:90]}"
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if traced else None
    print(json.dumps({"case": case, "seconds": seconds, "answer": answer,
                      "rss_peak_above_start": _status("VmHWM") - rss_before,
                      "tracemalloc_peak": peak}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=300, help="seconds a case may take")
    parser.add_argument("--only", nargs="+", choices=CASES, help="these cases only")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.case:
        return run_case(options.case, options.traced)
    rows = []
    for case in options.only or CASES:
        row = {"case": case}
        for traced in (False, True):
            command = [sys.executable, __file__, "--case", case] + (["--traced"] if traced
                                                                     else [])
            try:
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                      timeout=options.timeout)
                found = json.loads(done.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                found = {"seconds": float("inf"), "answer": f"no answer in {options.timeout} s",
                         "rss_peak_above_start": None, "tracemalloc_peak": None}
            if traced:
                row["tracemalloc_peak"] = found["tracemalloc_peak"]
            else:
                row.update(found)
        rows.append(row)
        mb = (lambda v: "—" if v is None else f"{v / 2 ** 20:,.1f} MB")
        print(f"{case:<26} {row['seconds']:8.2f} s  RSS +{mb(row['rss_peak_above_start']):>10}"
              f"  tracemalloc {mb(row['tracemalloc_peak']):>10}  {row['answer']}", flush=True)


if __name__ == "__main__":
    main()
