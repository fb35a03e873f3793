() => {
  // One streamed update per painted frame (explorer/ui.py passes this file to launch(js=...)).
  //
  // Gradio applies every message of its event stream to the page as soon as it arrives. Two
  // generation steps that arrive within one frame (network or scheduling jitter) are both
  // applied before the next paint, so the first is never seen. Here the stream of queue
  // messages is handed on to Gradio one message per animation frame: each update gets its
  // frame. Nothing is dropped or reordered (Gradio's streamed updates are diffs of the last
  // one), a long backlog is caught up at once, and a hidden tab (no frames) gets everything
  // at once.
  if (window.__explorerPacedStream) return;
  window.__explorerPacedStream = true;
  // Messages waiting beyond this many (about 3/4 s of updates at 40 a second) are handed on
  // together: a page that cannot keep up falls behind by at most that much.
  const MAX_BEHIND = 30;
  const FRAME_WAIT_MS = 100;
  const original = window.fetch.bind(window);

  const isQueueStream = (input, response) => {
    const url = typeof input === "string" ? input : (input && input.url) || "";
    const type = response.headers.get("content-type") || "";
    return /\/queue\/data(\?|$)/.test(url) && type.startsWith("text/event-stream")
      && response.body;
  };

  const paced = (response) => {
    const reader = response.body.getReader();
    const decoder = new TextDecoder(), encoder = new TextEncoder();
    const waiting = [];          // complete messages ("...\n\n"), oldest first
    let partial = "", ended = false, controller;

    // Hand on the oldest message (more when far behind), then wait until Gradio has applied it
    // (its handler runs in a task it queues with setTimeout 0: ours, queued after it, runs
    // after) and one frame has been painted with it, before handing on the next.
    // A page that gets no frames although it counts as visible (an iframe scrolled out of
    // sight is throttled) goes on after FRAME_WAIT_MS rather than stall.
    let busy = false, handedOn = 0;
    const handOn = () => {
      const hidden = document.visibilityState === "hidden";
      const count = hidden ? waiting.length : Math.max(1, waiting.length - MAX_BEHIND);
      for (const message of waiting.splice(0, count)) {
        controller.enqueue(encoder.encode(message));
      }
      busy = true;
      const mine = ++handedOn;
      const next = () => { if (mine === handedOn) done(); };
      setTimeout(() => setTimeout(() => {
        if (document.visibilityState === "hidden") {
          next();
        } else {
          requestAnimationFrame(next);
          setTimeout(next, FRAME_WAIT_MS);
        }
      }, 0), 0);
    };
    const done = () => {
      if (!busy) return;
      busy = false;
      if (waiting.length) handOn();
      else if (ended) controller.close();
    };
    // A tab hidden while waiting for a frame gets no frame: go on at once.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") done();
    });
    const schedule = () => { if (!busy) handOn(); };
    const pump = async () => {
      try {
        for (;;) {
          const {done: finished, value} = await reader.read();
          if (finished) break;
          partial += decoder.decode(value, {stream: true});
          let end;
          while ((end = partial.indexOf("\n\n")) >= 0) {
            waiting.push(partial.slice(0, end + 2));
            partial = partial.slice(end + 2);
          }
          if (waiting.length) schedule();
        }
        partial += decoder.decode();
        if (partial) waiting.push(partial);
        ended = true;
        if (!busy) {
          if (waiting.length) handOn();
          else controller.close();
        }
      } catch (error) {
        controller.error(error);
      }
    };
    const body = new ReadableStream({
      start(c) { controller = c; pump(); },
      cancel(reason) { return reader.cancel(reason); },
    });
    return new Response(body, {status: response.status, statusText: response.statusText,
                               headers: response.headers});
  };

  window.fetch = async (input, init) => {
    const response = await original(input, init);
    try {
      return isQueueStream(input, response) ? paced(response) : response;
    } catch (error) {
      return response;   // never break the app over pacing
    }
  };
}
