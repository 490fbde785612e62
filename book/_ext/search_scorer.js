/* The site search's scorer (Sphinx's `html_search_scorer`).
 *
 * Sphinx's own scores, kept as they are, give every page with a query word in
 * any of its headings the same score, and then order those pages by title,
 * alphabetically. A reader who pastes an error message gets the chapters in
 * alphabetical order. Here each result also gains one point for every word
 * of the query that the page's own title (its first heading) contains, so
 * that the page whose title names the error comes first. The page of
 * backward nodes, a reference of 649 entries, comes after every page that
 * explains a node: a node's own entry there ranks first only where no other
 * page names it (CdistBackward0), and TBackward0 finds the introduction.
 */
var Scorer = {
  // Sphinx 7.4's defaults (searchtools.js), unchanged.
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,

  score: (result) => {
    const [docname, title, anchor, descr, score, filename] = result;
    const query = new URLSearchParams(window.location.search).get("q") || "";
    const words = new Set(query.toLowerCase().split(/[^\p{L}\p{N}_]+/u)
                               .filter((word) => word.length > 2));
    const pageTitle = String(title).split(" > ")[0]
                            .replace(/<[^>]*>/g, "").toLowerCase();
    let inTitle = 0;
    for (const word of words) if (pageTitle.includes(word)) inTitle += 1;
    return docname === "book/backward_nodes" ? (score + inTitle) / 1000 : score + inTitle;
  },
};

/* The summary under each result is taken from the page's own text. Sphinx
 * takes it from the element with role="main", which in this theme also
 * holds the page's buttons (the download menu's ".pdf") and its contents
 * list; and a chapter's text begins with its "Open in Colab" badge and
 * its pointer to the fix. Here it is the article alone, without them. (This file is included in
 * language_data.js, which search.html loads after searchtools.js.) */
if (typeof Search !== "undefined" && Search.htmlToText) {
  const sphinxText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    const article = page.querySelector("article.bd-article");
    if (!article) return sphinxText(htmlString, anchor);
    for (const query of [".headerlink", "script", "style", ".colab-badge", ".fix-pointer"])
      article.querySelectorAll(query).forEach((el) => el.remove());
    const part = anchor ? article.querySelector(anchor) : null;
    return (part || article).textContent;
  };
}
