"""What a streamed generation costs the page: long tasks on the browser's main thread, Stop's
latency, and whether every step is painted. Run: python bench/stream_long_tasks.py
[--preset gpt2-small] [--tokens 200] [--throttle 4] [--profile].

Target (issue 32, item 10): with the page's CPU throttled 4x (DevTools'
Emulation.setCPUThrottlingRate), during a 200-token gpt2-small generation no long task over
200 ms, Stop lands within 1 s, and every streamed step is painted.

The app runs in-process (as in tests/browser/conftest.py), Debian's Chromium drives it at
1280x720. gpt2-small is built with random weights (the same architecture as OpenAI's; nothing
is downloaded). Two generations follow a 5-token warm-up, with the page throttled:
  1. to the end: the long tasks (a PerformanceObserver of `longtask` entries, from the click to
     the final state) and the steps the page showed, both in the DOM (a MutationObserver) and
     in painted frames (requestAnimationFrame: what a frame callback reads is what it paints);
  2. three keys typed into the prompt once the page shows step --stop-at (how long each takes
     to reach the box), then Stop pressed: the time from the click to the page showing the
     stopped state (a speed line with a single step, no live steps), and the steps painted up
     to there.
--profile adds a CPU profile of the page during run 1 (CDP Profiler): where its time went.
--train S then streams the Train tab's default job for S seconds, for comparison.
"""
from __future__ import annotations

import argparse
import collections
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

from _common import OthersCPU, load_average, print_table, verdict, wait_for_quiet  # noqa: E402

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from explorer.app.server import create_demo, launch_options  # noqa: E402
from explorer.book.config import PRESETS  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 720}
WARM = 5                 # tokens of the warm-up generation
LONGEST_MS = 200         # target: no long task over this
STOP_MS = 1000           # target: Stop lands within this

# Installed before each measured generation. window.__m: long tasks [start, duration] (the
# browser reports tasks over 50 ms), the step numbers the speed line showed after DOM changes
# and in painted frames (with their times), and when the stopped state first showed.
RECORD = r"""() => {
  const m = window.__m = {long: [], dom: [], frame: [], stoppedAt: null, on: true};
  const speed = document.querySelector('#speed');
  // In a frame: the step the speed line shows (innerText: what is displayed; the frame lays
  // the page out for its paint anyway). After a DOM change: every step the speed line holds,
  // read without a layout (the recorder must not add work of its own to the page's tasks).
  const painted = () => {
    const found = /(\d+) tokens ·/.exec(speed.innerText);  // (after Stop: a status first)
    return found ? [+found[1]] : [];
  };
  const held = () => Array.from(speed.textContent.matchAll(/(\d+) tokens ·/g), (x) => +x[1]);
  const note = (list, steps) => {
    for (const n of steps) {
      if (!list.length || list[list.length - 1][0] !== n) list.push([n, performance.now()]);
    }
  };
  m.observer = new PerformanceObserver((entries) => {
    for (const e of entries.getEntries()) m.long.push([e.startTime, e.duration]);
  });
  m.observer.observe({type: 'longtask'});
  m.mutations = new MutationObserver(() => {
    note(m.dom, held());
    // The stopped state: the speed line holds a single step, no live ones.
    if (m.stoppedAt === null && m.armed && !speed.querySelector('.nt-step')
        && held().length === 1) m.stoppedAt = performance.now();
  });
  m.mutations.observe(speed, {subtree: true, childList: true, characterData: true});
  m.typed = [];   // when each key typed into the prompt reached it
  document.querySelector('#gen_prompt textarea').addEventListener(
    'input', () => m.typed.push(performance.now()));
  const frame = () => { note(m.frame, painted()); if (m.on) requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
}"""
LONG_TASKS = """() => {
  const lt = window.__lt = {long: []};
  lt.observer = new PerformanceObserver((entries) => {
    for (const e of entries.getEntries()) lt.long.push([e.startTime, e.duration]);
  });
  lt.observer.observe({type: 'longtask'});
}"""
STOP_RECORDING = """() => { const m = window.__m; m.on = false; m.observer.disconnect();
  m.mutations.disconnect();
  return {long: m.long, dom: m.dom, frame: m.frame, stoppedAt: m.stoppedAt, typed: m.typed};
}"""


def tab(page, name):
    page.get_by_role("tab", name=name, exact=True).click()
    expect(page.get_by_role("tab", name=name, exact=True)).to_have_attribute(
        "aria-selected", "true")


def build(page, preset):
    tab(page, "1 · Build")
    expect(page.locator("#weights input[value=random]")).to_be_checked()  # random weights
    if page.locator("#preset input").input_value() != preset:
        page.locator("#preset input").click()
        page.get_by_role("option", name=preset, exact=True).click()
        # the knobs follow the preset through an event: wait for them before building
        expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS[preset].emb_dim))
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text(
        re.compile(rf"Model ready — {re.escape(preset)},"), timeout=600_000)


def set_tokens(page, n):
    number = page.locator("#max_new input[type=number]")
    number.fill(str(n))
    number.press("Enter")
    expect(page.locator("#max_new input[type=range]")).to_have_value(str(n))


def final_shown(page, n, timeout_ms):
    """Wait until the page holds the final state of an n-step generation (n rows in the step
    table) and, where the recorder runs, has painted step n. (Polled 4 times a second, with no
    layout of its own: the wait must not add to the page's work.)"""
    page.wait_for_function(
        f"""() => document.querySelectorAll('#history tbody tr').length === {n}
                  && (!window.__m || !window.__m.on
                      || window.__m.frame.some((r) => r[0] === {n}))""",
        timeout=timeout_ms, polling=250)


def page_clock_offset(page, tries=5):
    """time.perf_counter() (ms) minus the page's performance.now() at the same moment, from
    the quickest of a few round trips (the page is idle by now)."""
    best = None
    for _ in range(tries):
        before = time.perf_counter() * 1000
        now = page.evaluate("() => performance.now()")
        after = time.perf_counter() * 1000
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) / 2 - now)
    return best[1]


def this_run(records, before):
    """The records of a generation: they open on the last one's final step (``before``),
    still on screen when the recorder started; dropped."""
    records = list(records)
    while records and records[0][0] == before:
        records.pop(0)
    return records


def steps_seen(records):
    return sorted({n for n, _ in records if n >= 1})


def gaps(seen, last):
    """Steps from 1 to ``last`` never seen."""
    return sorted(set(range(1, last + 1)) - set(seen))


def print_long_tasks(long, records, label):
    """Each task over LONGEST_MS, with the step the speed line held when it began."""
    for start, duration in sorted(long):
        if duration > LONGEST_MS:
            held = [n for n, t in records if t <= start]
            print(f"  {label}: {duration:.0f} ms at {start / 1000:.2f} s, the page at step "
                  f"{held[-1] if held else '-'}")


def display_lag(dom, frames):
    """For each step: from its arrival in the DOM to its first painted frame (ms)."""
    arrived, painted = {}, {}
    for n, t in dom:
        arrived.setdefault(n, t)
    for n, t in frames:
        painted.setdefault(n, t)
    return sorted(painted[n] - arrived[n] for n in painted if n in arrived)


def long_task_rows(long, label):
    durations = [d for _, d in long]
    over = [d for d in durations if d > LONGEST_MS]
    longest = max(durations, default=0.0)
    return [
        [f"{label}: longest task", f"{longest:.0f} ms", f"<= {LONGEST_MS} ms",
         verdict(longest <= LONGEST_MS)],
        [f"{label}: long tasks (> 50 ms)", f"{len(durations)}, {sum(durations) / 1000:.2f} s "
                                           f"in all", "", ""],
        [f"{label}: tasks over {LONGEST_MS} ms", f"{len(over)}", "0", verdict(not over)],
    ]


def summarize_profile(profile, top=12):
    """Self time per (function, script) of a CDP CPU profile: where the page's time went."""
    if os.environ.get("PROFILE_JSON"):   # (for a closer look)
        import json
        with open(os.environ["PROFILE_JSON"], "w") as f:
            json.dump(profile, f)
    nodes = {node["id"]: node for node in profile["nodes"]}
    self_us = collections.Counter()
    deltas = profile.get("timeDeltas", [])
    for sample, delta in zip(profile.get("samples", []), deltas[1:] + [0]):
        frame = nodes[sample]["callFrame"]
        script = frame["url"].rsplit("/", 1)[-1] or "(native)"
        self_us[(frame["functionName"] or "(anonymous)", script)] += delta
    total = sum(self_us.values()) or 1
    print(f"CPU profile of the page (run 1): {total / 1e6:.2f} s of samples; self time by "
          f"function:")
    for (name, script), us in self_us.most_common(top):
        print(f"  {us / 1e3:8.0f} ms  {100 * us / total:5.1f} %  {name}  [{script}]")


def measure_training(page, seconds):
    """The Train tab's default job streamed for ``seconds`` (throttled as above): its long
    tasks, and how long a click on another tab takes to show that tab. Then the job, finished,
    replayed in 30 s: the same updates of the figures, with no training on this machine's
    cores (a Space's visitor: the server trains elsewhere), so its long tasks are the page's
    own cost; the live job's also hold the first draw of each figure."""
    tab(page, "6 · Train")
    page.evaluate(LONG_TASKS)
    page.locator("#train_btn").click()
    page.wait_for_timeout(seconds * 1000)
    started = time.perf_counter()
    page.get_by_role("tab", name="5 · Generate", exact=True).click()
    expect(page.get_by_role("tab", name="5 · Generate", exact=True)).to_have_attribute(
        "aria-selected", "true", timeout=120_000)
    switched = (time.perf_counter() - started) * 1000
    page.wait_for_timeout(2000)
    long = page.evaluate("() => { window.__lt.observer.disconnect(); return window.__lt.long; }")
    tab(page, "6 · Train")
    expect(page.locator("#train_progress")).to_contain_text("Finished", timeout=300_000)
    page.wait_for_timeout(1000)
    page.get_by_role("radio", name="30 s", exact=True).check()
    page.evaluate(LONG_TASKS)
    page.locator("#train_replay_btn").click()
    expect(page.locator("#train_progress")).to_contain_text("Replay of the recorded run", timeout=30_000)
    expect(page.locator("#train_progress")).to_contain_text("Finished", timeout=120_000)
    page.wait_for_timeout(1000)
    replay = page.evaluate("() => { window.__lt.observer.disconnect(); "
                           "return window.__lt.long; }")
    return long_task_rows(long, f"training ({seconds} s)") + [
        ["training: a tab click shown", f"{switched:.0f} ms", "", ""]] + long_task_rows(
        replay, "training replayed (30 s)")


def measure(args):
    demo = create_demo()
    opts = launch_options()     # after the page is made: its labels' translations
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1",
                            server_port=None, theme=opts["theme"], css=opts["css"], js=opts["js"],
                            i18n=opts["i18n"], max_file_size=opts["max_file_size"],
                            ssr_mode=False)
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.set_default_timeout(60_000)
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(url, wait_until="domcontentloaded")  # never "networkidle": SSE heartbeat
            expect(page.locator("#status")).to_contain_text("No model yet", timeout=60_000)
            started = time.perf_counter()
            build(page, args.preset)
            print(f"built {args.preset} (random weights) in {time.perf_counter() - started:.1f} s")
            tab(page, "5 · Generate")
            cdp = context.new_cdp_session(page)
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": args.throttle})
            set_tokens(page, WARM)
            page.locator("#gen_btn").click()
            final_shown(page, WARM, 120_000)   # warm: first bars and table drawn

            # 1. To the end.
            set_tokens(page, args.tokens)
            page.wait_for_timeout(500)
            page.evaluate(RECORD)
            if args.profile:
                cdp.send("Profiler.enable")
                cdp.send("Profiler.setSamplingInterval", {"interval": 500})
                cdp.send("Profiler.start")
            with OthersCPU() as others:
                started = time.perf_counter()
                page.locator("#gen_btn").click()
                final_shown(page, args.tokens, 600_000)
                wall = time.perf_counter() - started
            page.wait_for_timeout(500)   # the last frames
            profile = cdp.send("Profiler.stop")["profile"] if args.profile else None
            full = page.evaluate(STOP_RECORDING)
            speed = page.locator("#speed").inner_text()
            decode = float(re.search(r"([\d.]+) tokens/s", speed).group(1))
            rows_shown = page.locator("#history tbody tr").count()
            dom = steps_seen(this_run(full["dom"], WARM))
            painted = steps_seen(this_run(full["frame"], WARM))
            missing = gaps(painted, args.tokens)
            lags = display_lag(this_run(full["dom"], WARM), this_run(full["frame"], WARM))
            lag_median, lag_most = (lags[len(lags) // 2], lags[-1]) if lags else (0.0, 0.0)
            print(f"run 1: {args.tokens} tokens, {wall:.1f} s in the page, server's rate "
                  f"{decode:.1f} tokens/s; other processes {100 * (others.share or 0):.0f} % "
                  f"of the CPU")
            if args.details:
                print_long_tasks(full["long"], full["dom"], "to the end")
            rows += long_task_rows(full["long"], "to the end")
            rows += [
                ["to the end: steps in the DOM", f"{len(dom)} of {args.tokens}", "", ""],
                ["to the end: steps painted", f"{len(painted)} of {args.tokens}"
                 + (f" (never: {missing[:12]}{' …' if len(missing) > 12 else ''})"
                    if missing else ""), f"all {args.tokens}", verdict(not missing)],
                ["to the end: final state", f"step table {rows_shown} rows", f"{args.tokens}",
                 verdict(rows_shown == args.tokens)],
                ["to the end: a step's arrival to its paint", f"median {lag_median:.0f} ms, "
                                                               f"at most {lag_most:.0f} ms", "",
                 ""],
            ]

            # 2. Stop mid-stream.
            page.evaluate(RECORD)
            page.locator("#gen_btn").click()
            page.wait_for_function(
                f"""() => {{ const f = window.__m.frame, n = f.length && f[f.length - 1][0];
                return n >= {args.stop_at} && n < {args.tokens}; }}""",
                timeout=120_000, polling=50)
            keys = []   # a student types into the prompt mid-stream (it changes nothing now)
            for key in "abc":
                keys.append(time.perf_counter() * 1000)
                page.locator("#gen_prompt textarea").press(key)
            pressed = page.evaluate("() => { window.__m.armed = true; return "
                                    "window.__m.frame[window.__m.frame.length - 1][0]; }")
            clicked = time.perf_counter() * 1000
            page.locator("#stop_btn").click()
            page.wait_for_function("() => window.__m.stoppedAt !== null", timeout=120_000,
                                   polling=250)
            page.wait_for_timeout(500)
            stop = page.evaluate(STOP_RECORDING)
            # this process's clock on the page's (both monotonic; the wall clocks may drift)
            offset = page_clock_offset(page)
            keys, clicked = [k - offset for k in keys], clicked - offset
            last = int(re.search(r"(\d+) tokens ·", page.locator("#speed").inner_text())[1])
            latency = stop["stoppedAt"] - clicked
            # the steps painted before the stopped state, from the first to the last of them
            painted_stop = steps_seen([r for r in this_run(stop["frame"], args.tokens)
                                       if r[1] < stop["stoppedAt"]])
            missing_stop = gaps(painted_stop, max(painted_stop, default=0))
            typing = max(t - k for k, t in zip(keys, stop["typed"]))
            advanced = max([t - clicked for _, t in stop["frame"] if t < stop["stoppedAt"]],
                           default=0.0)
            if args.details:
                print_long_tasks(stop["long"], stop["dom"], "Stop run")
            rows += long_task_rows(stop["long"], "Stop run")
            rows += [
                ["Stop run: Stop lands (click to stopped state)",
                 f"{latency:.0f} ms; pressed at step {pressed}, stopped at {last}",
                 f"<= {STOP_MS} ms, before step {args.tokens}",
                 verdict(latency <= STOP_MS and last < args.tokens)],
                ["Stop run: a key typed into the prompt mid-stream, shown",
                 f"{typing:.0f} ms at most (3 keys)", "", ""],
                ["Stop run: the last step painted before it", f"{advanced:.0f} ms after the "
                                                               f"click", "", ""],
                ["Stop run: steps painted before it",
                 f"{len(painted_stop)} of {max(painted_stop, default=0)}"
                 + (f" (never: {missing_stop[:12]}{' …' if len(missing_stop) > 12 else ''})"
                    if missing_stop else ""), "every one", verdict(not missing_stop)],
            ]
            if args.train:
                rows += measure_training(page, args.train)
            if errors:
                rows.append(["uncaught errors in the page", "; ".join(errors)[:200], "none",
                             "FAIL"])
            browser.close()
    finally:
        demo.close()
    if profile:
        summarize_profile(profile)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2-small")
    parser.add_argument("--tokens", type=int, default=200, help="new tokens in each run")
    parser.add_argument("--stop-at", type=int, default=60,
                        help="press Stop once the page shows this step")
    parser.add_argument("--throttle", type=float, default=4.0,
                        help="the page's CPU slowed this many times (1: not throttled)")
    parser.add_argument("--profile", action="store_true",
                        help="print where the page's time went in run 1")
    parser.add_argument("--train", type=int, default=0, metavar="S",
                        help="then stream the Train tab's default job for S seconds: its long "
                             "tasks and a tab click; then replay it, finished, in 30 s")
    parser.add_argument("--details", action="store_true",
                        help="print every task over 200 ms, and when it came")
    parser.add_argument("--max-load", type=float, default=0.7)
    args = parser.parse_args()
    if args.tokens == WARM or not 0 < args.stop_at < args.tokens:
        parser.error(f"--tokens must differ from {WARM}, and --stop-at lie below it")
    print(f"load average before: {wait_for_quiet(args.max_load):.2f}")
    try:
        table = measure(args)
    finally:
        shutil.rmtree(os.environ["GRADIO_TEMP_DIR"], ignore_errors=True)
    print(f"load average after: {load_average():.2f}")
    print(f"page CPU throttled {args.throttle:g}x, {args.preset}, {args.tokens} tokens")
    print_table(table, ["figure", "measured", "target", ""])


if __name__ == "__main__":
    main()
