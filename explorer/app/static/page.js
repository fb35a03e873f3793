() => {
  // The page's language and lecture mode (the header's two toggles; explorer/app/prefs.py).
  //
  // Labels are translated by Gradio's own i18n (explorer/app/i18n: gr.I18n, given to launch),
  // which starts from the browser's locale. The language toggle switches Gradio's locale with
  // the call that Gradio's own Settings panel makes (changeLocale, exported by its core module,
  // which the page has loaded already: importing it again gives the same module). The text the
  // server makes follows the toggle's value, an input of every event.
  // tests/browser/test_i18n_browser.py checks both in a real page.
  const ex = (window.gptExplorer = window.gptExplorer || {});
  const LOCALES = { en: "en", zh: "zh-CN" };

  // The first language: the link's ?lang=, else the browser's (any Chinese: 中文).
  ex.initialLang = () => {
    const asked = new URLSearchParams(window.location.search).get("lang");
    if (asked && asked in LOCALES) return asked;
    const langs = navigator.languages && navigator.languages.length
      ? navigator.languages : [navigator.language || "en"];
    return langs.some((l) => /^zh\b/i.test(l)) ? "zh" : "en";
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

  ex.setLecture = (on) => {
    document.body.classList.toggle("lecture", !!on);
    return on;
  };
}
