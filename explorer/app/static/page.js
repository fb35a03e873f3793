(LOCALES, TOAST_TITLES) => {
  // The page's language and lecture mode (the header's two toggles; explorer/app/prefs.py).
  // LOCALES: each language's Gradio locale (explorer/app/i18n: one catalogue file each);
  // TOAST_TITLES: each language's words for a message box's kind ({zh: {error: "错误"}}).
  //
  // Labels are translated by Gradio's own i18n (explorer/app/i18n: gr.I18n, given to launch),
  // which starts from the browser's locale. The language toggle switches Gradio's locale with
  // the call that Gradio's own Settings panel makes (changeLocale, exported by its core module,
  // which the page has loaded already: importing it again gives the same module). The text the
  // server makes follows the toggle's value, an input of every event.
  const ex = (window.gptExplorer = window.gptExplorer || {});

  // The first language: the link's ?lang=, else the browser's (any Chinese: 中文).
  ex.initialLang = () => {
    // Exactly one valid ?lang= (a link repeating it is refused by the server too: share.py).
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

  ex.coreModule = async () => {
    if (!ex._core) {
      const url = performance.getEntriesByType("resource").map((e) => e.name)
        .find((name) => /\/assets\/core-[\w-]+\.js$/.test(name));
      ex._core = url ? import(url) : Promise.resolve(null);
    }
    return ex._core;
  };

  ex.setLang = async (lang) => {
    const locale = LOCALES[lang] || "en";
    document.documentElement.lang = locale;
    ex.lang = lang;
    try {
      const core = await ex.coreModule();
      if (core && typeof core.changeLocale === "function") core.changeLocale(locale);
      else console.warn("GPT Explorer: Gradio's changeLocale was not found; labels keep the "
                        + "browser's language (Settings → Language switches them).");
    } catch (error) {
      console.warn("GPT Explorer: could not switch Gradio's language", error);
    }
    return lang;
  };

  // Gradio titles a message box by its kind in English ("Error"), whatever gr.Error's title:
  // in another language, that language's word. (Gradio writes the title once per box.)
  const titleToasts = () => {
    const words = TOAST_TITLES[ex.lang];
    if (!words) return;   // (English)
    document.querySelectorAll(".toast-title").forEach((title) => {
      const kind = Array.from(title.classList).find((c) => c in words);
      const text = kind && Array.from(title.childNodes).find((n) => n.nodeType === Node.TEXT_NODE);
      if (text && text.data.trim() !== words[kind]) text.data = words[kind] + " ";
    });
  };
  new MutationObserver(titleToasts).observe(document.body, { childList: true, subtree: true });

  ex.setLecture = (on) => {
    document.body.classList.toggle("lecture", !!on);
    return on;
  };

  // A shared link opened (explorer/app/share_view.py): once its widgets are set, choose its
  // tab as a click does (an update of the gr.Tabs would mount every tab again).
  ex.openTab = (id) => {
    if (id) ex.selectTab(id);
    return [];
  };

  // A generation's stream (explorer/app/tabs/generate.py): #bars and #speed hold its last
  // steps, one .nt-step each (data-run, data-step), and two updates that reach the page within
  // one frame are drawn as one. So each step is shown for one animation frame at least, in
  // order; the last one stays. Without this script the style sheet shows the last step only.
  ex.paintSteps = (bars, speed) => {
    let run = null, shown = 0, queued = 0, queue = [], waiting = false;
    const show = (step) => {
      for (const root of [bars, speed]) {
        const items = root.querySelectorAll(".nt-step");
        const here = Array.from(items).some((el) => +el.dataset.step === step);
        root.dataset.painted = "1";   // (the style sheet's own rule steps aside)
        items.forEach((el, i) => {
          el.hidden = !(here ? +el.dataset.step === step : i === items.length - 1);
        });
      }
      shown = step;
    };
    const frame = () => {
      waiting = false;
      if (queue.length) show(queue.shift());
      if (queue.length) { waiting = true; requestAnimationFrame(frame); }
    };
    new MutationObserver(() => {
      const steps = Array.from(bars.querySelectorAll(".nt-step"));
      if (!steps.length) { run = null; queue = []; return; }
      if (steps[0].dataset.run !== run) { run = steps[0].dataset.run; shown = queued = 0; queue = []; }
      for (const el of steps) {
        const step = +el.dataset.step;
        if (step > queued) { queue.push(step); queued = step; }
      }
      show(shown || queue.shift() || +steps[steps.length - 1].dataset.step);
      if (queue.length && !waiting) { waiting = true; requestAnimationFrame(frame); }
    }).observe(bars, { childList: true, subtree: true });
  };
  // (the Generate tab's elements exist once Gradio has drawn the tab)
  let painting = null;
  setInterval(() => {
    const bars = document.getElementById("bars"), speed = document.getElementById("speed");
    if (bars && speed && bars !== painting) { painting = bars; ex.paintSteps(bars, speed); }
  }, 250);

  // A figure drawn while its tab was hidden was laid out at no width: when a tab shows, its
  // figures are laid out again at their real size (plotly's responsive resize).
  ex.relayoutShown = () => requestAnimationFrame(() => window.dispatchEvent(new Event("resize")));
  document.addEventListener("click", (event) => {
    const tab = event.target && event.target.closest && event.target.closest("#tabs button");
    if (tab) setTimeout(ex.relayoutShown, 0);
  }, true);

  // Gradio draws each tab's button in the visible row or, where they do not fit, in the
  // "More tabs" menu, with the tab's id (data-tab-id). By its id, not its title: the titles
  // change while the page's language changes (a link's ?lang= races its tab).
  ex.selectTab = (id, tries = 40) => {
    const root = document.getElementById("tabs");
    if (!id) return;
    const button = root && root.querySelector(`button[data-tab-id="${CSS.escape(id)}"]`);
    if (button) {
      if (button.getAttribute("aria-selected") !== "true") button.click();
      return;
    }
    // (the menu, or the tabs themselves, are drawn a moment later)
    const more = root && root.querySelector('button[aria-label="More tabs"]');
    if (more && tries % 10 === 0) more.click();
    if (tries > 0) setTimeout(() => ex.selectTab(id, tries - 1), 50);
  };

  // "Copy link": the server made the query ("?preset=...&lang=zh"); the address is this
  // page's own (on a Space, the Space's), and the clipboard gets it. Where the browser
  // refuses the clipboard (http on another host), the box's text is selected for Ctrl+C.
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

  // The guided walk (explorer/app/tabs/walk.py) and the map of which parts matter
  // (tabs/knockout.py): in a gr.HTML, a click on an element with data-<name>, or Enter or
  // Space on a focused one, becomes the component's select event with that value; the element
  // stays outlined. One listener on the component: it outlives the HTML's redraws (a new
  // model, the language).
  const clickable = (name) => (element, trigger) => {
    const attribute = `data-${name}`;
    const choose = (target) => {
      const item = target && target.closest ? target.closest(`[${attribute}]`) : null;
      if (!item || !element.contains(item)) return false;
      element.querySelectorAll(".walk-current").forEach((e) => e.classList.remove("walk-current"));
      item.classList.add("walk-current");
      const all = Array.from(element.querySelectorAll(`[${attribute}]`));
      trigger("select", { value: item.getAttribute(attribute), index: all.indexOf(item),
                          selected: true });
      return true;
    };
    element.addEventListener("click", (event) => { choose(event.target); });
    element.addEventListener("keydown", (event) => {
      if ((event.key === "Enter" || event.key === " ") && choose(event.target)) {
        event.preventDefault();   // Space would scroll the page
      }
    });
  };
  ex.walk = clickable("stage");
  ex.knock = clickable("knock");
}
