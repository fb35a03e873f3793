() => {
  // One streamed update per painted frame (the app passes this file to launch(js=...)).
  //
  // Gradio applies every message of its event stream to the page as soon as it arrives. Two
  // generation steps that arrive within one frame (network or scheduling jitter) are both
  // applied before the next paint, so the first is never seen. Here the stream of queue
  // messages is handed on to Gradio one message per animation frame: each update gets its
  // frame. Nothing is dropped, changed or reordered (Gradio's streamed updates are diffs of the
  // last one), a long backlog is caught up at once, and a hidden tab gets everything at once.
  //
  // What it relies on, and what happens when that changes: it touches only a successful
  // text/event-stream answer to a ".../queue/data" URL, and splits it at blank lines ("\n\n",
  // the standard SSE message end). Any other response passes through untouched; bytes it
  // cannot split into messages are handed on as they come (unpaced, still live). It never
  // throws: the reader (Gradio) may cancel the stream, or the network break it, at any moment.
  // tests/browser/test_streaming.py checks all of this in a real page.
  //
  // Off switch: a page that sets window.__explorerPacedStream = true before this runs keeps
  // Gradio's own streaming (the tests use it).
  if (window.__explorerPacedStream) return;
  window.__explorerPacedStream = true;
  // Messages waiting beyond this many (about 3/4 s of updates at 40 a second) are handed on
  // together: a page that cannot keep up falls behind by at most that much.
  const MAX_BEHIND = 30;
  // A page that gets no frames although it counts as visible (an iframe scrolled out of sight
  // is throttled) goes on after this long rather than stall.
  const FRAME_WAIT_MS = 100;
  const NONE = new Uint8Array(0);
  const original = window.fetch.bind(window);
  // Each paced stream's catch-up: hands on at once all it holds. The page's every new request
  // runs them first. A user who acts while updates are still being handed on has moved on; and
  // Gradio must have seen the end of the last stream ("close_stream") before it submits a new
  // event, or it waits for that event on a stream the server has closed (it never comes).
  const catchUps = new Set();

  const isQueueStream = (input, response) => {
    const url = typeof input === "string" ? input : String((input && input.url) || input);
    return /\/queue\/data(\?|$)/.test(url) && response.ok && response.body
      && !response.body.locked
      && /^text\/event-stream/i.test(response.headers.get("content-type") || "");
  };

  const paced = (response) => {
    const waiting = [];        // complete messages (bytes, each ending in "\n\n"), oldest first
    let partial = NONE;        // the bytes after the last complete message
    let givenLF = false;       // the incomplete rest, already handed on, ended in "\n"
    let controller, reader, open = true, ended = false, failure = null, busy = false, turn = 0;
    const body = new ReadableStream({
      start(c) { controller = c; },
      cancel(reason) {         // Gradio is done with the stream (e.g. after "close_stream")
        open = false;
        catchUps.delete(catchUp);
        waiting.length = 0;
        return reader.cancel(reason).catch(() => {});
      },
    });
    const result = new Response(body, {status: response.status,
                                       statusText: response.statusText,
                                       headers: response.headers});
    reader = response.body.getReader();   // last: nothing above can have failed half-way

    // Every call on the controller is guarded: the stream may be cancelled at any moment.
    const give = (bytes) => {
      if (!open || !bytes.length) return;
      try { controller.enqueue(bytes); } catch (e) { open = false; }
    };
    const finish = () => {
      catchUps.delete(catchUp);
      if (!open) return;
      open = false;
      try { failure ? controller.error(failure) : controller.close(); } catch (e) { /* gone */ }
    };
    // Cut the bytes at blank lines: each message ends at the second "\n" of a "\n\n".
    const split = (chunk) => {
      const from = partial.length;     // the partial holds no message end: look after it
      let bytes = chunk;
      if (from) {
        bytes = new Uint8Array(from + chunk.length);
        bytes.set(partial);
        bytes.set(chunk, from);
      }
      let start = 0;
      for (let i = from; i < bytes.length; i++) {
        const before = i > start ? bytes[i - 1] : (i === 0 && givenLF ? 10 : 0);
        if (bytes[i] === 10 && before === 10) {
          waiting.push(bytes.subarray(start, i + 1));
          start = i + 1;
        }
      }
      givenLF = false;
      partial = bytes.subarray(start);
    };

    // Hand on the oldest message (more when far behind), then wait until Gradio has applied it
    // (its handler runs in a task it queues with setTimeout 0: ours, queued after it, runs
    // after) and one frame has been painted with it, before handing on the next. With nothing
    // complete waiting, the incomplete rest goes on at once: it applies no update by itself
    // (or it is a stream this file cannot split, which then streams unpaced).
    const handOn = () => {
      if (!waiting.length) {
        if (partial.length) givenLF = partial[partial.length - 1] === 10;
        give(partial);
        partial = NONE;
        if (ended) finish();
        return;
      }
      const hidden = document.visibilityState === "hidden";
      const count = hidden ? waiting.length : Math.max(1, waiting.length - MAX_BEHIND);
      for (const message of waiting.splice(0, count)) give(message);
      busy = true;
      const mine = ++turn;
      const next = () => {
        if (mine !== turn || !busy) return;   // the frame and the time-out both call this
        busy = false;
        safely(handOn);
      };
      setTimeout(() => setTimeout(() => {
        if (document.visibilityState === "hidden") {
          next();
        } else {
          requestAnimationFrame(next);
          setTimeout(next, FRAME_WAIT_MS);
        }
      }, 0), 0);
    };
    const catchUp = () => {
      for (const message of waiting.splice(0)) give(message);
      if (partial.length) givenLF = partial[partial.length - 1] === 10;
      give(partial);
      partial = NONE;
      if (ended) finish();
    };
    catchUps.add(catchUp);
    // Should this file have a bug, the page gets what is left, unpaced, rather than an error.
    const safely = (step) => {
      try {
        step();
      } catch (error) {
        busy = false;
        catchUp();
      }
    };

    (async () => {
      try {
        for (;;) {
          const {done, value} = await reader.read();
          if (done || !open) break;
          safely(() => {
            split(value);
            if (!busy) handOn();
          });
        }
      } catch (error) {
        failure = error;      // a broken connection: Gradio gets it after what came before
      }
      ended = true;
      if (!busy) safely(handOn);
    })();
    return result;
  };

  window.fetch = async (input, init) => {
    for (const catchUp of catchUps) {
      try { catchUp(); } catch (error) { catchUps.delete(catchUp); }
    }
    const response = await original(input, init);
    try {
      return isQueueStream(input, response) ? paced(response) : response;
    } catch (error) {
      return response;   // never break the app over pacing
    }
  };
}
