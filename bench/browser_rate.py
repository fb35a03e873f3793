"""Live rendering of a generation in a real browser: does a warm page show the steps as fast as
the model makes them? Run: python bench/browser_rate.py [--tokens 200] [--preset teach-tiny].

Target (issue "Speed"): "Live bars keep up: a warm browser page renders every generation step
at the decode rate up to >= 30 steps/s, the final state always shown." So the page must paint
>= min(decode rate, 30) distinct steps per second (or every step), and end on the last step.

The app runs in-process (as in tests/browser/conftest.py) and Debian's Chromium drives it. The
page records the step count of the speed line ("37 tokens · **512.3 tokens/s**"), the rows of
the history table and the bars' labels at every DOM change (MutationObserver) and at every
painted frame (requestAnimationFrame): what a viewer can see is what reaches a frame.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time

# Before Gradio is imported: no version-check thread, uploads and cache in a throwaway folder,
# and loopback never through a proxy (launch() would fail its localhost check).
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["GRADIO_TEMP_DIR"] = tempfile.mkdtemp(prefix="gpt_explorer_bench_")
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

from _common import load_average, print_table, verdict, wait_for_quiet  # first: sets up explorer

from playwright.sync_api import expect, sync_playwright

from explorer.app.tabs import generate as generate_tab
from explorer.book.config import PRESETS
from explorer.app.server import create_demo, launch_options

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
TAB_BUILD, TAB_GENERATE = "1 · Build", "5 · Generate"
WARM = 5  # tokens of the warm-up generation
TARGET_RATE = 30.0  # steps/s: beyond this a viewer need not see every step

RECORD = """() => {
  // One entry per change of what the page shows: the step count of the speed line, the
  // history's row count and the bars' labels, tagged by where it was seen ("dom": after a DOM
  // change, "frame": in a painted frame).
  window.__renders = [];
  const last = {dom: null, frame: null};
  const read = () => {
    const m = (document.querySelector('#speed')?.textContent || '').match(/(\\d+) tokens ·/);
    return {n: m ? +m[1] : 0,
            rows: document.querySelectorAll('#history tbody tr').length,
            bars: Array.from(document.querySelectorAll('#bars .nt-bars div'))
                       .map(t => t.textContent).join('|')};
  };
  const record = (src) => {
    const s = read(), key = `${s.n}/${s.rows}/${s.bars}`;
    if (key === last[src]) return;
    last[src] = key;
    window.__renders.push({t: performance.now(), src, ...s});
  };
  // Watch the speed line and the step table (the bars change with the speed line).
  window.__observer = new MutationObserver(() => record('dom'));
  for (const id of ['#speed', '#history'])
    window.__observer.observe(document.querySelector(id),
        {subtree: true, childList: true, characterData: true, attributes: true});
  window.__recording = true;
  const frame = () => { record('frame'); if (window.__recording) requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
}"""
STOP = "() => { window.__recording = false; window.__observer.disconnect(); }"


def tab(page, name):
    page.get_by_role("tab", name=name, exact=True).click()
    expect(page.get_by_role("tab", name=name, exact=True)).to_have_attribute(
        "aria-selected", "true")


def build(page, preset, timeout_ms):
    tab(page, TAB_BUILD)
    if page.locator("#preset input").input_value() != preset:
        page.locator("#preset input").click()
        page.get_by_role("option", name=preset, exact=True).click()
        # the knobs follow the preset through an event: wait for them before building
        expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS[preset].emb_dim))
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text(
        re.compile(rf"Model ready — {re.escape(preset)},"), timeout=timeout_ms)


def generate(page, n, timeout_ms):
    """Generate ``n`` tokens; returns once the speed line shows the n-th step."""
    number = page.locator("#max_new input[type=number]")
    number.fill(str(n))
    number.press("Enter")
    expect(page.locator("#max_new input[type=range]")).to_have_value(str(n))
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text(
        re.compile(rf"(^|\s){n} tokens · [\d.]+ tokens/s"), timeout=timeout_ms)


def this_run(renders, src):
    """The records of one kind for the measured run: they open on the warm-up's last state,
    which is dropped (a greedy run repeats it exactly, so its step count is the only tell)."""
    mine = [r for r in renders if r["src"] == src]
    while mine and mine[0]["n"] == WARM:
        mine.pop(0)
    return mine


def first_shown(records):
    """For each step count, the first record that shows it, in time order."""
    firsts = {}
    for r in records:
        if r["n"] >= 1:
            firsts.setdefault(r["n"], r)
    return sorted(firsts.values(), key=lambda r: r["t"])


def rate(steps):
    """Steps shown per second, from the first step shown to the last."""
    if len(steps) < 2 or steps[-1]["t"] <= steps[0]["t"]:
        return float("nan")
    return (len(steps) - 1) / ((steps[-1]["t"] - steps[0]["t"]) / 1000)


class Paced:
    """Hold the app's step generator to at most ``steps_per_s`` (bench only): on a 2-core
    machine the model decoding flat out and Chromium share the cores, so this shows what the
    page itself can draw when the CPU is not starved (on a lecture's laptop, the server and
    the browser are usually different machines)."""

    def __init__(self, steps_per_s):
        self.interval = 1.0 / steps_per_s if steps_per_s else 0.0
        self.original = generate_tab.generate_steps

    def __enter__(self):
        def paced(*args, **kwargs):
            due = time.perf_counter()
            for step in self.original(*args, **kwargs):
                due += self.interval
                time.sleep(max(0.0, due - time.perf_counter()))
                yield step
        if self.interval:
            generate_tab.generate_steps = paced
        return self

    def __exit__(self, *exc):
        generate_tab.generate_steps = self.original


def measure(preset, n, pace):
    """Build ``preset`` in a fresh page, warm it, generate ``n`` tokens; the table rows."""
    build_ms = 600_000 if preset == "gpt2-small" else 60_000
    demo = create_demo()
    opts = launch_options()     # after the page is made: its labels' translations
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1",
                            server_port=None, theme=opts["theme"], css=opts["css"], js=opts["js"],
                            i18n=opts["i18n"], max_file_size=opts["max_file_size"],
                            ssr_mode=False)
    try:
        with sync_playwright() as p, Paced(pace):
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(30_000)
            page.goto(url, wait_until="domcontentloaded")  # never "networkidle": SSE heartbeat
            build(page, preset, build_ms)
            tab(page, TAB_GENERATE)
            generate(page, WARM, 60_000)  # warm: first bars and table drawn

            page.evaluate(RECORD)
            started = time.perf_counter()
            generate(page, n, 600_000)
            wall = time.perf_counter() - started
            page.wait_for_timeout(500)  # let the last frames land before stopping the record
            page.evaluate(STOP)
            renders = page.evaluate("() => window.__renders")
            speed = page.locator("#speed").inner_text()
            rows = page.locator("#history tbody tr").count()
            text = page.locator("#gen_output textarea").input_value()
            prompt = page.locator("#gen_prompt textarea").input_value()
            bars = page.locator("#bars .nt-bars div").all_text_contents()
            browser.close()
    finally:
        demo.close()

    decode = float(re.search(r"([\d.]+) tokens/s", speed).group(1))  # the server's own rate
    frames = this_run(renders, "frame")
    dom, painted = first_shown(this_run(renders, "dom")), first_shown(frames)
    need = min(decode, TARGET_RATE)
    every = len(painted) == n
    last = frames[-1] if frames else {"n": 0, "rows": 0}
    final_ok = (last["n"] == n and last["rows"] == n and f"{n} tokens ·" in speed and rows == n
                and text.startswith(prompt) and len(text) > len(prompt)
                and any("chosen" in b for b in bars))
    name = preset + (f", model paced to {pace:g} steps/s" if pace else ", model flat out")
    print(f"{name}: {wall:.2f} s in the browser, {n / decode:.2f} s on the server")
    # Gradio applies every streamed message to the DOM in order; the app sends at most 40 a
    # second (generate_tab.STREAM_INTERVAL_S); frames skip the steps applied between two paints.
    return [
        [f"[{name}] decode rate (server)", f"{decode:.1f} steps/s", "", ""],
        ["  steps in the DOM (MutationObserver)", f"{len(dom)} of {n}, {rate(dom):.1f} steps/s",
         "", ""],
        ["  steps in painted frames", f"{len(painted)} of {n}, {rate(painted):.1f} steps/s",
         f"all {n} or >= {need:.1f} steps/s", verdict(every or rate(painted) >= need)],
        ["  final state: speed line, table, text, bars",
         f"step {last['n']}, {last['rows']} rows painted; "
         f"~{max(wall - n / decode, 0):.1f} s after the server", f"step {n}, {n} rows",
         verdict(final_ok)],
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="teach-tiny")
    parser.add_argument("--tokens", type=int, default=200, help="new tokens in each run")
    parser.add_argument("--pace", type=float, nargs="*", default=[0, TARGET_RATE],
                        help="runs with the model held to these steps/s (0: flat out)")
    parser.add_argument("--max-load", type=float, default=0.7)
    args = parser.parse_args()
    if args.tokens == WARM:
        parser.error(f"--tokens must differ from the warm-up's {WARM}")
    print(f"load average before: {wait_for_quiet(args.max_load):.2f}")
    table = []
    try:
        for pace in args.pace:
            table += measure(args.preset, args.tokens, pace)
    finally:
        shutil.rmtree(os.environ["GRADIO_TEMP_DIR"], ignore_errors=True)
    print(f"load average after: {load_average():.2f}")
    print_table(table, ["figure", "measured", "target", ""])


if __name__ == "__main__":
    main()
