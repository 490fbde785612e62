// Written inline into every page's head by layout.html (no request of its own).
(() => {
  // The colour theme before the first paint (the theme's script, at the end of
  // the page, would resolve "auto" only then: code blocks would change size).
  const html = document.documentElement;
  const dark = () => matchMedia("(prefers-color-scheme: dark)").matches;
  const mode = localStorage.getItem("mode") || "{{ default_mode }}";
  const theme = localStorage.getItem("theme") || mode;
  html.dataset.mode = mode;
  html.dataset.theme = theme === "auto" ? (dark() ? "dark" : "light") : theme;
  // Print in light colours, whatever the reader's theme.
  addEventListener("beforeprint", () => {
    if (html.dataset.theme !== "dark") return;
    html.dataset.theme = "light";
    html.dataset.printedFromDark = "";
  });
  addEventListener("afterprint", () => {
    if (!("printedFromDark" in html.dataset)) return;
    html.dataset.theme = "dark";
    delete html.dataset.printedFromDark;
  });
  // On a phone, a tap on a link in the menu or contents drawer closes the
  // drawer, so that the reader sees where the link leads.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("dialog a[href]");
    const drawer = link && link.closest("dialog");
    if (drawer && drawer.open) requestAnimationFrame(() => drawer.close());
  });
  // Boxes that scroll (code, outputs, tables) take the keyboard's focus, so
  // that the arrow keys scroll them. Written focusable (book/_ext/
  // light_pages.py, rewrite 9), each is settled when the browser lays it out
  // and whenever its size changes (the theme's own script measured every box
  // at `load`, laying out every cell that book.css leaves for later: rewrite 8).
  const laidOut = (entry) => entry.borderBoxSize[0].inlineSize > 0 || entry.borderBoxSize[0].blockSize > 0;
  const observer = new ResizeObserver((entries) => {
    const boxes = entries.filter(laidOut).map((entry) => entry.target);
    const scrolls = boxes.map((box) =>
      box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight);
    boxes.forEach((box, i) => { box.tabIndex = scrolls[i] ? 0 : -1; });
  });
  document.addEventListener("DOMContentLoaded", () => document.querySelectorAll(
    "pre, .nboutput > .output_area, .cell_output > .output, .jp-RenderedHTMLCommon, " +
    ".pst-scrollable-table-container").forEach((box) => observer.observe(box)));
})();
