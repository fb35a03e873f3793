"""Live generation in a real browser, and the page's pacer (explorer/app/static/paced_stream.js).

The pacer hands Gradio's event stream on one message per animation frame, so that no generation
step is applied and overwritten between two paints. It stays only while these tests hold:

- every step the server sends is painted, even when all of them arrive at once;
- with the pacer off, or with a stream of another shape than the one it knows (other framing,
  another content type, extra SSE comments), the page still streams live;
- it never throws (no uncaught page error), whatever the stream does.

The page tests open a fresh page each (their own session: no leftovers of an earlier run),
build the default preset (a teaching-size model) and generate N tokens, with the server sending
every step. A tap installed under the pacer (before the page's scripts) re-times and reshapes
Gradio's stream as a network or a new Gradio might, and notes which steps it released and when.
A recorder samples the page in every animation frame: Gradio changes the page in tasks and
microtasks, never inside a frame callback, so what a frame callback reads is what that frame
paints.

The sandbox tests run the pacer on made-up streams, on a stand-in window."""
import json
import os
from pathlib import Path

import pytest

import explorer.app

pytestmark = pytest.mark.browser

try:
    from playwright.sync_api import expect
except ImportError:  # same rule as a missing browser: skip, except in CI
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)",
                allow_module_level=True)

PACER = (Path(explorer.app.__file__).parent / "static" / "paced_stream.js").read_text()
N = 24   # tokens per generation: with the other messages under the pacer's MAX_BEHIND (30)
SPACING_MS = 40   # a "slow model": one message every 40 ms, more than two frames apart
WAIT_MS = 30_000  # for each page step (expect's own default is 5 s): the machine may be busy


@pytest.fixture
def every_step_sent(monkeypatch):
    """The server sends every step (it normally sends at most one per STREAM_INTERVAL_S), so a
    test can ask for each step on screen."""
    from explorer.app.tabs import generate   # where generate() reads it

    monkeypatch.setattr(generate, "STREAM_INTERVAL_S", 0)


# ---------------------------------------------------------------------------------------------
# The tap: wraps the page's fetch before anything else does (the pacer then wraps the tap), and
# hands Gradio's queue stream on as `config` says:
#   release "as-is": each network chunk as it comes; "burst": everything at once when the
#   stream ends (cut into `piece`-byte chunks if set); "spaced": one message every `spacing` ms.
#   shape "crlf": "\r\n" line ends; "text-plain": content type text/plain; "comments": an SSE
#   comment line before every message.
# window.__tap.sent: [step index, time released]; .done: the time the last bytes went; .open: the
# streams it holds; .ended: the streams it has seen end. (Gradio must see a stream's end before the page's next action, or that
# action waits forever: a slow network has that race too. The tests wait for .open === 0.)
TAP = """(config) => {
  window.__tap = {sent: [], done: null, open: 0, ended: 0};
  const original = window.fetch.bind(window);
  const encoder = new TextEncoder(), decoder = new TextDecoder();
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const reshape = (text) => config.shape === "crlf" ? text.replace(/\\n/g, "\\r\\n")
    : config.shape === "comments" ? text.replace(/(^|\\n\\n)(?=.)/g, "$1: tap\\n\\n") : text;
  window.fetch = async (input, init) => {
    const response = await original(input, init);
    const url = typeof input === "string" ? input : String((input && input.url) || input);
    if (!/\\/queue\\/data/.test(url) || !response.body) return response;
    const reader = response.body.getReader();
    window.__tap.open += 1;
    const body = new ReadableStream({async start(out) {
      const release = (text) => {
        for (const m of text.matchAll(/"(\\d+) tokens /g)) {
          window.__tap.sent.push([+m[1], performance.now()]);
        }
        const bytes = encoder.encode(reshape(text));
        const piece = config.piece || bytes.length || 1;
        for (let i = 0; i < bytes.length; i += piece) out.enqueue(bytes.subarray(i, i + piece));
      };
      let text = "", held = "";
      try {
        for (;;) {
          const {done, value} = await reader.read();
          if (done) break;
          const chunk = decoder.decode(value, {stream: true});
          if (config.release === "as-is") { release(chunk); continue; }
          text += chunk;
          let end;
          while ((end = text.indexOf("\\n\\n")) >= 0) {
            const message = text.slice(0, end + 2);
            text = text.slice(end + 2);
            if (config.release === "burst") { held += message; continue; }
            await sleep(config.spacing);
            release(message);
          }
        }
        release(held + text);
        out.close();
      } catch (error) {   // Gradio aborted the stream (after "close_stream"), or cancelled ours
        try { out.error(error); } catch (e) { /* cancelled */ }
      } finally {
        window.__tap.done = performance.now();
        window.__tap.open -= 1;
        window.__tap.ended += 1;
      }
    }});
    const headers = new Headers(response.headers);
    if (config.shape === "text-plain") headers.set("content-type", "text/plain; charset=utf-8");
    return new Response(body, {status: response.status, headers});
  };
  window.__tapFetch = window.fetch;
}"""

# Every state of the counter ("N tokens ·") and of the bars that a frame painted.
RECORDER = """() => {
  window.__painted = [];
  const frame = () => {
    const speed = document.querySelector("#speed");
    const m = speed && /^\\s*(\\d+) tokens/.exec(speed.textContent);
    const n = m ? +m[1] : null;
    const bars = Array.from(document.querySelectorAll("#bars .nt-bars div"),
                            (row) => row.textContent).join("|");
    const last = window.__painted[window.__painted.length - 1];
    if (!last || last.n !== n || last.bars !== bars) {
      window.__painted.push({n, bars, t: performance.now()});
    }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""


@pytest.fixture
def open_app(browser, app_url, every_step_sent):
    """A factory: a fresh page with the tap set as given and the pacer on or off, with the
    default preset built and the Generate tab open; returns the page and its uncaught errors."""
    contexts = []

    def open_(pacer=True, **tap):
        context = browser.new_context()
        contexts.append(context)
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.add_init_script(f"({TAP})({json.dumps(tap)})")
        if not pacer:
            page.add_init_script("window.__explorerPacedStream = true;")  # its off switch
        page.goto(app_url, wait_until="domcontentloaded")
        expect(page.locator("#status")).to_contain_text("No model yet", timeout=WAIT_MS)
        settle(page, 1)   # the page's load event (the activation curves) has streamed
        page.locator("#build_btn").click()   # the default preset: a teaching-size model
        # the module's first build, on a busy machine, has taken over 30 s
        expect(page.locator("#status")).to_contain_text("Model ready", timeout=3 * WAIT_MS)
        page.get_by_role("tab", name="5 · Generate", exact=True).click()
        number = page.locator("#max_new input[type=number]")
        number.fill(str(N))
        number.press("Enter")
        expect(page.locator("#max_new input[type=range]")).to_have_value(str(N), timeout=WAIT_MS)
        # the pacer wraps the tap exactly when it is on
        assert page.evaluate("() => window.fetch !== window.__tapFetch") == pacer
        return page, errors

    yield open_
    for context in contexts:
        context.close()


def settle(page, ended=0):
    """Wait until the tap holds no stream, and has seen ``ended`` streams end (see TAP)."""
    page.wait_for_function(f"() => window.__tap.open === 0 && window.__tap.ended >= {ended}")


def generate(page):
    """Generate N tokens; returns what the tap released and what the frames painted."""
    settle(page)
    page.evaluate(RECORDER)
    page.locator("#gen_btn").click()
    page.wait_for_function(f"() => window.__painted.some((f) => f.n === {N})")
    page.wait_for_function("() => window.__tap.done !== null")
    page.wait_for_timeout(300)   # the stream's last messages and the pacer's last frames
    return page.evaluate("() => ({tap: window.__tap, painted: window.__painted})")


@pytest.mark.parametrize("tap", [dict(release="as-is"), dict(release="burst", piece=5)],
                         ids=["as-sent", "all-at-once-in-5-byte-pieces"])
def test_every_step_is_painted(open_app, tap):
    page, errors = open_app(**tap)
    got = generate(page)
    sent = {n for n, _ in got["tap"]["sent"]}
    assert sent == set(range(1, N + 1))   # the server sent every step
    painted = {f["n"] for f in got["painted"] if f["n"]}
    assert sent <= painted, f"steps never painted: {sorted(sent - painted)}"
    assert all("chosen" in f["bars"] for f in got["painted"] if f["n"])  # with their bars
    assert not errors


def test_an_action_while_the_pacer_catches_up_is_not_lost(open_app):
    """All steps arrive at once and the pacer hands them on one per frame; the lecturer clicks
    "Next token" before it is done. The pacer hands on the rest at once, Gradio sees the old
    stream end, and the new step arrives (without the catch-up it waited forever)."""
    page, errors = open_app(release="burst")
    settle(page)
    page.evaluate(RECORDER)
    page.locator("#gen_btn").click()
    page.wait_for_function("() => window.__painted.some((f) => f.n === 1)")
    page.locator("#step_btn").click()
    # the last step, then the new one (it starts afresh if the text was clicked mid-playback)
    page.wait_for_function(f"""() => {{
      const painted = window.__painted, last = painted.findIndex((f) => f.n === {N});
      return last >= 0 && painted.slice(last + 1).some((f) => f.n === 1 || f.n === {N + 1});
    }}""")
    assert not errors


def painted_while_streaming(got):
    """The step indices that frames painted before the tap released the stream's last bytes."""
    return {f["n"] for f in got["painted"] if f["n"] and f["t"] < got["tap"]["done"]}


def test_without_the_pacer_the_page_still_streams_live(open_app):
    page, errors = open_app(pacer=False, release="spaced", spacing=SPACING_MS)
    got = generate(page)
    live = painted_while_streaming(got)
    assert len(live) >= N // 2, f"only {sorted(live)} painted while the stream came in"
    assert not errors


@pytest.mark.parametrize("shape", ["crlf", "text-plain", "comments"])
def test_a_stream_of_another_shape_still_streams_live(open_app, shape):
    """A stream the pacer cannot split (CRLF), does not recognise (not text/event-stream), or
    splits into more messages than Gradio applies (comments): Gradio reads all three."""
    page, errors = open_app(release="spaced", spacing=SPACING_MS, shape=shape)
    got = generate(page)
    live = painted_while_streaming(got)
    assert len(live) >= N // 2, f"only {sorted(live)} painted while the stream came in"
    assert not errors


# ---------------------------------------------------------------------------------------------
# The sandbox: the pacer installed on a stand-in window whose fetch answers with a made-up
# response. window.pace(url, response) fetches through it; window.readAll(response) reads a
# body to its end, noting the frame each chunk came in, and the error that ended it, if any.
SANDBOX = """(source) => {
  let answer;
  const sandbox = {fetch: async () => answer, __explorerPacedStream: false};
  new Function("window", "return (" + source + ")();")(sandbox);
  window.pace = (url, response) => { answer = response; return sandbox.fetch(url); };
  window.frame = 0;
  const count = () => { window.frame += 1; requestAnimationFrame(count); };
  requestAnimationFrame(count);
  window.sse = (chunks, {type = "text/event-stream", status = 200, end = true,
                         fail = null} = {}) => {
    const events = {cancelled: false};
    const body = new ReadableStream({async start(c) {
      for (const chunk of chunks) {
        c.enqueue(new TextEncoder().encode(chunk));
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
      if (fail) c.error(new TypeError(fail)); else if (end) c.close();
    }, cancel() { events.cancelled = true; }});
    const response = new Response(body, {status, headers: {"content-type": type}});
    response.events = events;
    return response;
  };
  window.readAll = async (response, ms = 3000) => {
    const reader = response.body.getReader(), got = [];
    const read = async () => {
      try {
        for (;;) {
          const {done, value} = await reader.read();
          if (done) return {got};
          got.push({text: new TextDecoder().decode(value), frame: window.frame});
        }
      } catch (error) { return {got, error: String(error)}; }
    };
    // a stalled pacer must fail the test, not hang it
    return Promise.race([read(), new Promise((resolve) => setTimeout(
      () => resolve({got, stalled: true}), ms))]);
  };
}"""
MESSAGES = ['data: {"n": 1}\n\n', 'data: {"n": 2}\n\n', 'data: {"n": 3}\n\n']


@pytest.fixture
def sandbox(browser):
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content("<p>sandbox</p>")
    page.evaluate(SANDBOX, PACER)
    yield page
    page.wait_for_timeout(200)   # the pacer's last frames: an error thrown there counts too
    context.close()
    assert not errors, errors


def completion_frames(got):
    """The frame in which each message of MESSAGES was complete in what the reader got."""
    frames, text = [], ""
    for chunk in got:
        text += chunk["text"]
        frames += [chunk["frame"]] * (text.count("\n\n") - len(frames))
    return frames


@pytest.mark.parametrize("frames", [True, False], ids=["frames", "no-frames"])
def test_messages_that_arrive_together_reach_gradio_one_per_frame(sandbox, frames):
    if not frames:   # a page that gets no frames (a throttled iframe): the pacer must go on
        sandbox.evaluate("() => { window.requestAnimationFrame = () => 0; }")
        sandbox.evaluate(SANDBOX, PACER)
    got = sandbox.evaluate("""async (messages) => readAll(await pace(
        "/gradio_api/queue/data?session_hash=x", sse([messages.join("")])))""", MESSAGES)
    assert not got.get("stalled") and not got.get("error")
    assert "".join(c["text"] for c in got["got"]) == "".join(MESSAGES)
    if frames:
        shown = completion_frames(got["got"])
        assert len(shown) == 3 and shown[0] < shown[1] < shown[2], shown


def test_messages_cut_anywhere_still_reach_gradio_one_per_frame(sandbox):
    """The stream cut in two at every byte, and cut into single bytes: each message still
    completes in a frame of its own, and the bytes come through unchanged."""
    results = sandbox.evaluate("""async (messages) => {
      const text = messages.join("");
      const cuts = Array.from({length: text.length - 1}, (_, i) =>
        [text.slice(0, i + 1), text.slice(i + 1)]);
      cuts.push(Array.from(text));
      return Promise.all(cuts.map(async (chunks) =>
        readAll(await pace("/gradio_api/queue/data", sse(chunks)))));
    }""", MESSAGES)
    for cut, got in enumerate(results):
        assert not got.get("stalled") and not got.get("error"), cut
        assert "".join(c["text"] for c in got["got"]) == "".join(MESSAGES), cut
        shown = completion_frames(got["got"])
        assert len(shown) == 3 and shown[0] < shown[1] < shown[2], (cut, shown)


def test_what_the_pacer_does_not_recognise_passes_through_untouched(sandbox):
    same = sandbox.evaluate("""async (messages) => {
      const cases = [["/gradio_api/config", sse(messages, {type: "application/json"})],
                     ["/gradio_api/queue/join", sse(messages)],
                     ["/gradio_api/queue/data", sse(messages, {type: "text/plain"})],
                     ["/gradio_api/queue/data", sse(messages, {status: 500})]];
      return Promise.all(cases.map(async ([url, r]) => (await pace(url, r)) === r));
    }""", MESSAGES)
    assert same == [True] * 4


def test_a_stream_it_cannot_split_is_handed_on_at_once(sandbox):
    """CRLF framing (valid SSE, which Gradio reads): no "\\n\\n" to split at. The bytes must go
    on as they come, not be held until the stream ends (this one never does)."""
    got = sandbox.evaluate("""async () => {
      const response = await pace("/gradio_api/queue/data",
                                  sse(['data: {"n": 1}\\r\\n\\r\\n'], {end: false}));
      const reader = response.body.getReader();
      const first = await Promise.race([reader.read(), new Promise((resolve) =>
        setTimeout(() => resolve("held"), 1000))]);
      reader.cancel();
      return first === "held" ? first : new TextDecoder().decode(first.value);
    }""")
    assert got == 'data: {"n": 1}\r\n\r\n'


def test_a_cancelled_or_broken_stream_never_throws(sandbox):
    """Gradio cancels the stream after its "close_stream" message, often while the pacer still
    holds messages or has just seen the end; a network can break the stream half-way. Either
    way nothing may throw (the sandbox fixture fails on any uncaught page error)."""
    got = sandbox.evaluate("""async (messages) => {
      const cancel = async (source) => {
        const reader = (await pace("/gradio_api/queue/data", source)).body.getReader();
        await reader.read();
        await new Promise((resolve) => setTimeout(resolve, 20));
        await reader.cancel("close_stream");
        return source.events.cancelled;
      };
      // cancelled after the pacer has seen the end, with messages still waiting
      await cancel(sse([messages.join("")]));
      // cancelled while the network stream is still open: the cancel must reach it
      const reached = await cancel(sse(messages, {end: false}));
      // broken after two messages: the reader gets both, then the error
      const broken = await readAll(await pace("/gradio_api/queue/data",
                                              sse(messages.slice(0, 2), {fail: "network"})));
      return {reached, broken};
    }""", MESSAGES)
    assert got["reached"]
    assert "".join(c["text"] for c in got["broken"]["got"]) == "".join(MESSAGES[:2])
    assert "network" in got["broken"]["error"]
