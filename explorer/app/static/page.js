(LOCALES, switchLocale) => {
  // LOCALES: each language's Gradio locale (layout.LOCALES); switchLocale: (locale) =>
  // Promise<bool>, Gradio's labels switched to it (gradio_private: Gradio has no public way).
  // The page's lang attribute is the locale too: the style sheet titles message boxes by it.
  const ex = (window.gptExplorer = window.gptExplorer || {});

  // The first language: the link's ?lang= (exactly one, as the server reads it), else the
  // browser's (any Chinese: 中文).
  ex.initialLang = () => {
    const asked = new URLSearchParams(window.location.search).getAll("lang");
    if (asked.length === 1 && Object.hasOwn(LOCALES, asked[0])) return asked[0];
    const langs = navigator.languages && navigator.languages.length
      ? navigator.languages : [navigator.language || "en"];
    for (const l of langs) {
      const code = Object.keys(LOCALES).find(
        (c) => c !== "en" && l.toLowerCase().startsWith(c.toLowerCase()));
      if (code) return code;
    }
    return "en";
  };

  // A language or lecture-mode switch redraws every view, which put the page back at its top
  // (issue 47, item 11): its place is kept here and put back after the redraw (restorePlace).
  let kept = null;
  const keepPlace = () => { if (kept === null) kept = window.scrollY; };
  ex.restorePlace = () => {
    if (kept === null) return;
    const y = kept;
    kept = null;
    const put = () => { if (Math.abs(window.scrollY - y) > 1) window.scrollTo(0, y); };
    requestAnimationFrame(() => { put(); requestAnimationFrame(put); });
  };

  ex.setLang = async (lang) => {
    keepPlace();
    const locale = LOCALES[lang] || "en";
    document.documentElement.lang = locale;
    try {
      if (!(await switchLocale(locale))) {
        console.warn("GPT Explorer: Gradio's changeLocale was not found; labels keep the "
                     + "browser's language (Settings → Language switches them).");
      }
    } catch (error) {
      console.warn("GPT Explorer: could not switch Gradio's language", error);
    }
    return lang;
  };

  ex.setLecture = (on) => {
    keepPlace();
    document.body.classList.toggle("lecture", !!on);
    return on;
  };

  // A generation's stream (tabs/generate.py): a few updates a second, each with the steps made
  // since the one before, each a .nt-step (data-run, data-step) in #bars and #speed. The page
  // shows them in turn, spread over the time until the next update, in the last one's place:
  // only what differs changes, which a slow page paints cheaply. An update with no .nt-step
  // (Stop, Clear, Next token, a new model) ends the run.
  const patch = (el, model) => {   // el's attributes and children made those of model
    for (const a of Array.from(el.attributes)) {
      if (!model.hasAttribute(a.name)) el.removeAttribute(a.name);
    }
    for (const a of Array.from(model.attributes)) {
      if (el.getAttribute(a.name) !== a.value) el.setAttribute(a.name, a.value);
    }
    const kids = Array.from(el.childNodes), models = Array.from(model.childNodes);
    kids.slice(models.length).forEach((kid) => kid.remove());
    models.forEach((m, i) => {
      const kid = kids[i];
      if (!kid) el.appendChild(m.cloneNode(true));
      else if (kid.nodeName !== m.nodeName) kid.replaceWith(m.cloneNode(true));
      else if (kid.nodeType === Node.ELEMENT_NODE) patch(kid, m);
      else if (kid.nodeValue !== m.nodeValue) kid.nodeValue = m.nodeValue;
    });
  };
  // The generated text follows its newest tokens unless the reader scrolled it up: Gradio
  // 6.31's Textbox autoscroll scrolls only once (issue 47, item 9).
  const followText = (restart) => {
    const box = document.querySelector("#gen_output textarea");
    if (!box) return;
    if (!restart && box.__followed !== undefined && box.scrollTop < box.__followed - 2) return;
    box.scrollTop = box.scrollHeight;
    box.__followed = box.scrollTop;
  };
  let stopSteps = () => {}, shownStep = () => null;
  ex.shownStep = () => shownStep();
  ex.paintSteps = (bars, speed) => {
    const roots = [bars, speed];
    let run = null, copies = new Map(), queue = [], queued = 0, current = null;
    let arrived = null, spacing = 0, due = 0, waiting = false, halted = null;
    const show = (step) => {
      roots.forEach((root, i) => {
        const items = root.querySelectorAll(".nt-step"), last = items[items.length - 1];
        const copy = copies.get(step);
        if (!last || !copy || last.dataset.step === String(step)) return;
        patch(last, copy[i]);
      });
      current = step;
      for (const old of copies.keys()) if (old < step) copies.delete(old);
    };
    const frame = (now) => {
      waiting = false;
      if (queue.length && now >= due) {
        show(queue.shift());
        due = now + spacing;
      }
      if (queue.length) { waiting = true; requestAnimationFrame(frame); }
    };
    const changed = () => {
      const found = roots.map((root) => Array.from(root.querySelectorAll(".nt-step")));
      const first = found[0][0] || found[1][0];
      // (after this update's text is in its box too: the same task sets both)
      const restart = !first || first.dataset.run !== run;
      requestAnimationFrame(() => followText(restart));
      if (!first) { run = null; queue = []; copies.clear(); current = null; return; }
      if (first.dataset.run !== run) {
        run = first.dataset.run; queue = []; copies.clear(); queued = 0; current = null;
        arrived = null;
      }
      found.forEach((items, i) => items.forEach((el) => {
        const step = +el.dataset.step;
        if (el.dataset.run !== run || step <= queued) return;
        const copy = copies.get(step) || [null, null];
        if (copy[i] === null) copy[i] = el.cloneNode(true);
        copies.set(step, copy);
      }));
      // queue the steps whose bars and speed line are both here, in order (past one that
      // never came whole, should a later one have: it cannot come any more)
      const here = new Set(found.flat().map((el) => +el.dataset.step));
      const whole = (step) => copies.has(step) && !copies.get(step).includes(null);
      const before = queue.length;
      while (run !== halted) {
        const next = queued + 1;
        if (whole(next)) queue.push(next);
        else if (here.has(next) || ![...copies.keys()].some((k) => k > next && whole(k))) break;
        queued = next;
      }
      if (queue.length > before) {
        // spread what is queued over the time the last update took to come
        const now = performance.now();
        spacing = arrived === null ? 0 : Math.min(now - arrived, 1000) / queue.length;
        arrived = now;
      }
      if (current === null && queue.length) current = queue.shift();
      if (current !== null) show(current);   // (again, after an update's redraw)
      if (queue.length && !waiting) { waiting = true; requestAnimationFrame(frame); }
    };
    // Stop pressed: the steps still queued are not shown, nor are later ones of the run (the
    // server's last view, as far as it got, follows).
    stopSteps = () => { halted = run; queue = []; };
    // The step on screen (Stop ends the generation there: tabs/generate.py), or null
    shownStep = () => (run === null ? null : current);
    // (an update with as many steps as the one before changes only texts and data-step)
    const watch = { childList: true, subtree: true, characterData: true, attributes: true,
                    attributeFilter: ["data-step"] };
    new MutationObserver(changed).observe(bars, watch);
    new MutationObserver(changed).observe(speed, watch);
  };
  document.addEventListener("click", (event) => {
    const target = event.target;
    if (target && target.closest && target.closest("#stop_btn")) stopSteps();
  }, true);
  // #bars and #speed are drawn when the Generate tab first shows, and each says so (maybe
  // before this script runs: tabs/generate.py STEP_ROOT_JS); painting starts once both are.
  let painting = [null, null];
  ex.stepRoots = ex.stepRoots || {};
  ex.stepRootLoaded = () => {
    const { bars, speed } = ex.stepRoots;
    if (!bars || !speed || !bars.isConnected || !speed.isConnected) return;
    if (bars === painting[0] && speed === painting[1]) return;
    painting = [bars, speed];
    ex.paintSteps(bars, speed);
  };
  ex.stepRootLoaded();

  // A figure drawn while its tab was hidden was laid out at no width: a tab shown lays its
  // figures out again (plotly's responsive resize).
  ex.relayoutShown = () => requestAnimationFrame(() => window.dispatchEvent(new Event("resize")));

  // Lecture mode: a figure just asked for is scrolled into view whole, the browser's own way
  // (issue 47, item 7: a projector's 720 px hold it, not also the controls above it). It is
  // drawn after the answer arrives, so its new size is waited for, a moment at most.
  ex.showWhole = (id) => {
    const el = document.getElementById(id);
    if (!el || !document.body.classList.contains("lecture")) return;
    const seen = new ResizeObserver(() => el.scrollIntoView({block: "nearest"}));
    seen.observe(el);
    setTimeout(() => seen.disconnect(), 1500);
  };

  // "Copy link": the server's query on this page's address, to the clipboard; where the
  // browser refuses that (http on another host), the box's text is selected for Ctrl+C.
  ex.shareLink = (query) => {
    if (typeof query !== "string" || !query.startsWith("?")) return query;
    const url = window.location.origin + window.location.pathname + query;
    const select = () => {
      const box = document.querySelector("#share_link textarea, #share_link input");
      if (box) { box.focus(); box.select(); }
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(url).catch(() => setTimeout(select, 100));
    } else {
      setTimeout(select, 100);
    }
    return url;
  };

  // The guided walk, the knock-out map and the patching maps: in a gr.HTML, a click (or Enter
  // or Space) on an element with data-<name> becomes the component's select event with that
  // value and the fields chosen(item) adds. One listener on the component outlives the HTML's redraws.
  const clickable = (element, trigger, name, chosen) => {
    const attribute = `data-${name}`;
    const choose = (target) => {
      const item = target && target.closest ? target.closest(`[${attribute}]`) : null;
      if (!item || !element.contains(item)) return false;
      const more = chosen(item);
      const all = Array.from(element.querySelectorAll(`[${attribute}]`));
      trigger("select", { value: item.getAttribute(attribute), index: all.indexOf(item),
                          selected: true, ...more });
      return true;
    };
    element.addEventListener("click", (event) => { choose(event.target); });
    element.addEventListener("keydown", (event) => {
      if ((event.key === "Enter" || event.key === " ") && choose(event.target)) {
        event.preventDefault();   // Space would scroll the page
      }
    });
  };
  // A cell of a patching map (tabs/patching.py): its patch.
  ex.patch = (element, trigger) => clickable(element, trigger, "patch", () => ({}));
  // The walk's stage stays outlined.
  ex.walk = (element, trigger) => clickable(element, trigger, "stage", (item) => {
    element.querySelectorAll(".walk-current").forEach((e) => e.classList.remove("walk-current"));
    item.classList.add("walk-current");
    return {};
  });
  // The map's clicks are numbered; every click is sent (the event queues them) and its cell
  // striped and listed in the queue line until the server says it was applied (data-applied
  // on the map: the last click's number) or a minute passes (a refused click has its
  // message). The outline is the server's: B's cell only.
  ex.knock = (element, trigger) => {
    const pending = [];                       // [number, spec, when] of clicks not yet applied
    let sent = 0;
    const paint = () => {
      const root = element.querySelector("[data-applied]");
      const applied = root ? Number(root.getAttribute("data-applied")) : 0;
      const now = Date.now();
      while (pending.length && (pending[0][0] <= applied || now - pending[0][2] > 60000)) {
        pending.shift();
      }
      const specs = new Set(pending.map((p) => p[1]));
      for (const cell of element.querySelectorAll("td[data-knock]")) {
        const queued = specs.has(cell.getAttribute("data-knock"));
        if (cell.classList.contains("knock-queued") !== queued) {
          cell.classList.toggle("knock-queued", queued);
        }
      }
      const line = element.querySelector(".knock-queue");
      if (line) {
        const text = pending.length ? (line.getAttribute("data-queued") || "{specs}")
          .replace("{specs}", pending.map((p) => p[1]).join(" → ")) : "";
        if (line.textContent !== text) line.textContent = text;
      }
    };
    clickable(element, trigger, "knock", (item) => {
      sent += 1;
      pending.push([sent, item.getAttribute("data-knock"), Date.now()]);
      paint();
      return { click: sent };
    });
    new MutationObserver(paint).observe(element, { childList: true, subtree: true });
  };
}
