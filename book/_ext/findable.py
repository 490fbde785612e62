"""Every page findable and shareable: what a search engine and a link
preview read.

The ecosystem's extensions do most of it (_config.yml loads them):
sphinx-sitemap writes sitemap.xml, sphinxext-opengraph the Open Graph tags,
sphinx-notfound-page the 404 page, and Sphinx itself the canonical link of
each page from `html_baseurl`. This extension gives them what they need and
adds what they do not do:

1. `html_baseurl` (the canonical links, the sitemap, the Open Graph URLs)
   from `repository.url`, as the Colab links are made: the Pages workflow
   sets that one address (https://github.com/OWNER/NAME is published at
   https://owner.github.io/NAME/). A build published elsewhere (the class
   site, at /class/) sets `html_baseurl` itself. The 404 page's links are
   absolute, under the address's path. Sphinx's `project` is the book's
   title (no page says "Project name not set").
2. Each page's description is the one written for it: a `description`
   under `myst: html_meta:` in a page's front matter, or in a notebook's
   metadata. A page of the toc without one is a warning (an error in
   `make book-strict`), as is one over DESCRIPTION_MAX characters. It is
   the page's meta description and its Open Graph and Twitter description.
3. A card for each page (`_images/cards/`, a PNG of 1200x630 drawn with
   matplotlib when the book is built, no network, about 20 kB): the page's
   title in large, the book's title and address; on the pages of
   `findable_error_cards` (the intro and chapter 1), the error itself
   above the title. Its address is the page's og:image and twitter:image.
4. The Twitter card tags (`summary_large_image`, title, description,
   image), which sphinxext-opengraph writes only for its own cards.
5. The site's root, `index.html`, which Jupyter Book writes as a bare
   redirect to the first page: a page with a language, a title, a
   description, a canonical link, the card and the Open Graph tags of the
   first page, that redirects there.
6. The 404 page: the site search and the book's contents.
7. A pointer to the fix near the top of each chapter page, right under its
   Colab badge: chapter 1, where a search for the error lands, shows the
   intro's quick fix itself (read from book/intro.md, its one source); the
   others link to it and to chapter 4's every way out. It is added to the
   page's HTML, not to its text: the site search does not index it.
8. The search page, the general index and the 404 page say `noindex`
   (each with a description of its own), and are not in the sitemap. sphinx-sitemap lists the pages written
   by the build; those an incremental build leaves as they were are added.
"""
import hashlib
import html
import re
import textwrap
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
GITHUB = "https://github.com/"
PLACEHOLDER_PROJECT = "Project name not set"
DESCRIPTION_MAX = 300
# Pages that say noindex, with their description.
NOT_INDEXED = {
    "search": "Search the book on pruning nn.Linear in place without breaking autograd.",
    "genindex": "The index of the book on pruning nn.Linear in place without breaking autograd.",
    "404": "There is no page at this address; search the book or pick a page from its contents.",
}
NOINDEX = '<meta name="robots" content="noindex" />\n'
CARDS = "_images/cards"
CARD_SIZE = (1200, 630)
META_DESCRIPTION = re.compile(
    r'<meta\b(?=[^>]*\bname="description")[^>]*\bcontent="([^"]*)"[^>]*>')
TAG = re.compile(r"<[^>]+>")
# The intro's quick fix: the Python block of its `quick-fix` admonition.
QUICK_FIX = re.compile(
    r"````\{admonition\}[^\n]*\n:class:[^\n]*\bquick-fix\b[^\n]*\n.*?```python\n(.*?)```",
    re.S)
BADGE_END = re.compile(r'(<p class="colab-badge">.*?</p>)', re.S)


class FindableError(RuntimeError):
    """What this extension needs is missing."""


def site_url(repository_url):
    """'https://github.com/Owner/name' -> 'https://owner.github.io/name/',
    where GitHub Pages publishes the repository's site (tools/links.py's
    book_url, which the notebooks' links use; a test holds them equal)."""
    if not repository_url.startswith(GITHUB):
        raise FindableError(f"repository.url must start with {GITHUB}, got {repository_url!r}")
    owner, _, name = repository_url[len(GITHUB):].strip("/").partition("/")
    if not owner or not name or "/" in name:
        raise FindableError(f"repository.url must be {GITHUB}OWNER/NAME, got {repository_url!r}")
    return f"https://{owner.lower()}.github.io/{name}/"


def plain(title):
    """A page title as text: no tags, no entities."""
    return html.unescape(TAG.sub("", title or "")).strip()


def set_addresses(app, config):
    """html_baseurl, Open Graph's site, the 404 page's prefix, the project (1)."""
    if config.project == PLACEHOLDER_PROJECT and config.html_title:
        config.project = config.html_title
    if not config.findable:
        return
    missing = [name for name in ("ogp_site_url", "notfound_urls_prefix", "sitemap_url_scheme")
               if name not in config]
    if missing:
        raise FindableError(f"the extensions of {missing} are not loaded (_config.yml: "
                            "sphinx: extra_extensions)")
    if not config.html_baseurl:
        repository = (config.html_theme_options or {}).get("repository_url", "")
        config.html_baseurl = site_url(repository)
    if not config.html_baseurl.endswith("/"):
        config.html_baseurl += "/"
    if not config.ogp_site_url:
        config.ogp_site_url = config.html_baseurl
    config.notfound_urls_prefix = urlsplit(config.html_baseurl).path or "/"


def page_description(context):
    """The page's written meta description, or None."""
    found = META_DESCRIPTION.search(context.get("metatags") or "")
    return html.unescape(found[1]).strip() if found else None


def card_name(pagename, text):
    """The card's file: one per page and content (a changed card gets a new
    address, which the sites that cache previews fetch again)."""
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:8]
    return f"{pagename.replace('/', '_')}-{digest}.png"


def wrapped(text, width):
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


def draw_card(path, title, site_name, address, error=None):
    """The card, a PNG of CARD_SIZE with a palette of 32 colours (3): the
    title in the largest size at which it fits, or an error."""
    import io

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    from PIL import Image

    matplotlib.use("agg")
    width, height = CARD_SIZE
    left, right, bottom = 0.06, 0.95, 0.2   # of the card: the text's room
    sizes = [(28, 44), (24, 52)] if error else [(44, 30), (38, 35), (32, 42), (28, 48)]
    for size, characters in sizes:
        figure = Figure(figsize=(width / 100, height / 100), dpi=100)
        canvas = FigureCanvasAgg(figure)
        figure.patch.set_facecolor("white")
        figure.patches.append(Rectangle((0, 0), 0.018, 1, transform=figure.transFigure,
                                        color="#d9480f", figure=figure))
        top = 0.9
        texts = [figure.text(left, top, site_name, fontsize=20, color="#495057", va="top")]
        top -= 0.12
        if error:
            lines = wrapped(error, 46)
            texts.append(figure.text(
                left, top, "\n".join(lines), fontsize=25, family="DejaVu Sans Mono",
                color="#a61e1e", va="top", linespacing=1.35,
                bbox=dict(boxstyle="round,pad=0.6", fc="#fff5f5", ec="#ffc9c9")))
            top -= 0.085 * len(lines) + 0.12
        texts.append(figure.text(left, top, "\n".join(wrapped(title, characters)),
                                 fontsize=size, weight="bold", color="#212529", va="top",
                                 linespacing=1.2))
        figure.text(left, 0.07, address, fontsize=18, color="#495057", va="bottom")
        renderer = canvas.get_renderer()
        boxes = [text.get_window_extent(renderer) for text in texts]
        if all(box.x1 <= right * width and box.y0 >= bottom * height for box in boxes):
            break
    else:
        raise FindableError(f"the title does not fit on a card: {title!r}")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    image = Image.open(buffer).convert("RGB")
    if image.size != CARD_SIZE:
        raise FindableError(f"the card was drawn {image.size}, not {CARD_SIZE}")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=32, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def the_error(app):
    """tools.book.THE_ERROR (the extension runs inside Sphinx, where the
    repository is not importable: book_html loads tools/book.py by its file)."""
    from book_html import book_facts_module

    return book_facts_module(app.confdir).THE_ERROR


def card(app, pagename, title):
    """(address, alt text) of the page's card, drawn if it is not there (3)."""
    error = the_error(app) if pagename in app.config.findable_error_cards else None
    site_name = app.config.project
    address = app.config.html_baseurl.split("://", 1)[-1].rstrip("/")
    name = card_name(pagename, "\n".join([title, site_name, address, error or ""]))
    path = Path(app.outdir) / CARDS / name
    if not path.is_file():
        draw_card(path, title, site_name, address, error)
    alt = f"{error} ({title})" if error else f"{title} ({site_name})"
    return urljoin(app.config.html_baseurl, f"{CARDS}/{name}"), alt


def meta(name, content, attribute="name"):
    return f'<meta {attribute}="{name}" content="{html.escape(content, quote=True)}" />\n'


def page_tags(app, pagename, templatename, context, doctree):
    """Description, card and Twitter tags (2, 3, 4), before
    sphinxext-opengraph writes its tags from the page's fields; noindex (8)."""
    if app.builder.format != "html" or not app.config.findable:
        return
    if pagename in NOT_INDEXED:
        context["metatags"] = (context.get("metatags") or "") + NOINDEX + \
            meta("description", NOT_INDEXED[pagename])
        return
    if doctree is None:
        return
    description = page_description(context)
    title = plain(context.get("title"))
    if not description:
        LOGGER.warning("%s has no description: write one under `myst: html_meta:` "
                       '("description lang=en") in its front matter or notebook metadata',
                       pagename, location=pagename)
        return
    if len(description) > DESCRIPTION_MAX:
        LOGGER.warning("%s: its description is %d characters long, more than %d",
                       pagename, len(description), DESCRIPTION_MAX, location=pagename)
    image, alt = card(app, pagename, title)
    # a copy: sphinxext-opengraph pops what it reads, and the page's
    # fields are the environment's own
    context["meta"] = {**(context.get("meta") or {}), "og:description": description,
                       "og:image": image, "og:image:alt": alt}
    context["metatags"] = (context.get("metatags") or "") + "".join([
        meta("og:image:width", str(CARD_SIZE[0]), "property"),
        meta("og:image:height", str(CARD_SIZE[1]), "property"),
        meta("og:image:type", "image/png", "property"),
        meta("twitter:card", "summary_large_image"),
        meta("twitter:title", title),
        meta("twitter:description", description),
        meta("twitter:image", image),
        meta("twitter:image:alt", alt),
    ])


# --- the pointer to the fix (7) -------------------------------------------

def quick_fix_code(srcdir):
    """The code of the intro's quick fix (book/intro.md, its one source)."""
    intro = Path(srcdir) / "book" / "intro.md"
    found = QUICK_FIX.findall(intro.read_text()) if intro.is_file() else []
    if len(found) != 1:
        raise FindableError(f"{intro}: {len(found)} quick-fix admonitions with a Python "
                            "block found, one expected")
    return found[0]


def fix_pointer(app, pagename):
    """The HTML of the pointer to the fix for chapter `pagename`."""
    intro = app.builder.get_relative_uri(pagename, app.config.root_doc)
    ways_out = app.builder.get_relative_uri(pagename, app.config.findable_ways_out)
    if pagename == app.config.findable_quick_fix_on:
        code = app.builder.highlighter.highlight_block(quick_fix_code(app.srcdir), "python")
        return ('<div class="admonition tip quick-fix fix-pointer">\n'
                '<p class="admonition-title">Here for the fix?</p>\n'
                f'<div class="highlight-python notranslate">{code}</div>\n'
                "<p>A new parameter, and an optimizer that knows it: the last line "
                "matters. Why it works is <a class=\"reference internal\" "
                f'href="{intro}">on the first page</a>; every way out, and what '
                f'each costs, in <a class="reference internal" href="{ways_out}">'
                "chapter 4</a>.</p>\n</div>\n")
    if pagename == app.config.findable_ways_out:
        ways_out = "this chapter runs every way out, below"
    else:
        ways_out = (f'<a class="reference internal" href="{ways_out}">chapter 4</a> '
                    "runs every way out")
    return ('<p class="fix-pointer">Here for the fix? <a class="reference internal" '
            f'href="{intro}">The quick fix</a> is on the first page; {ways_out}.</p>\n')


def add_fix_pointer(app, pagename, templatename, context, doctree):
    """The pointer, right under a chapter's Colab badge (7)."""
    if app.builder.format != "html" or doctree is None or not app.config.findable:
        return
    if not str(app.env.doc2path(pagename)).endswith(".ipynb") \
            or pagename not in chapters_of(app):
        return
    body = context.get("body", "")
    badges = BADGE_END.findall(body)
    if len(badges) != 1:
        raise FindableError(f"{pagename}: {len(badges)} Colab badges found, one expected "
                            "(the pointer to the fix goes under it)")
    context["body"] = body.replace(badges[0], badges[0] + fix_pointer(app, pagename), 1)


def chapters_of(app):
    """The chapters: the toc's notebooks, not the student editions."""
    return {name for name in app.env.found_docs
            if str(app.env.doc2path(name)).endswith(".ipynb") and "/student/" not in name}


# --- the root page (5) and the 404 page (6) --------------------------------

ROOT_PAGE = """<!DOCTYPE html>
<html lang="{language}">
<head>
<meta charset="utf-8" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<title>{title}</title>
<meta name="description" content="{description}" />
<link rel="canonical" href="{canonical}" />
<link rel="icon" href="{favicon}" />
{tags}<meta http-equiv="refresh" content="0; url={first}" />
</head>
<body>
<p><a href="{first}">{title}</a></p>
</body>
</html>
"""
HEAD_TAG = re.compile(r'<meta (?:property|name)="(?:og|twitter):[^"]+" content="[^"]*" />')
CANONICAL = re.compile(r'<link rel="canonical" href="([^"]+)" />')
TITLE = re.compile(r"<title>(.*?)</title>", re.S)


def root_page(first_html, first, language, favicon):
    """The site root's index.html, from the first page's head (5)."""
    description = META_DESCRIPTION.search(first_html)
    canonical = CANONICAL.search(first_html)
    title = TITLE.search(first_html)
    tags = HEAD_TAG.findall(first_html)
    if not (description and canonical and title and tags):
        raise FindableError(f"{first}: the first page lacks a description, a canonical "
                            "link, a title or Open Graph tags for the root page")
    return ROOT_PAGE.format(language=language, title=title[1].strip(),
                            description=description[1], canonical=canonical[1],
                            favicon=favicon, tags="".join(f"{t}\n" for t in tags),
                            first=first)


def write_root_page(app, exception):
    if exception is not None or app.builder.format != "html" or not app.config.findable:
        return
    outdir = Path(app.outdir)
    first = f"{app.config.root_doc}.html"
    if first == "index.html" or not (outdir / first).is_file():
        return
    favicon = f"_static/{Path(app.config.html_favicon).name}" if app.config.html_favicon else ""
    (outdir / "index.html").write_text(root_page(
        (outdir / first).read_text(), first, app.config.language or "en", favicon))


def complete_sitemap(app, exception):
    """Every page in the sitemap, also those this build did not write (8):
    sphinx-sitemap lists the pages as they are written."""
    if exception is not None or app.builder.format != "html" or not app.config.findable:
        return
    from sphinx_sitemap import is_excluded

    queue = app.env.app.sitemap_links
    listed = []
    while not queue.empty():
        listed.append(queue.get_nowait())
    links = {link for link, _ in listed}
    for name in sorted(app.env.all_docs):
        link = app.builder.get_target_uri(name)
        if link not in links and not is_excluded(link, app.config.sitemap_excludes):
            listed.append((link, None))
    for item in sorted(listed):
        queue.put(item)


def contents_list(app):
    """The toc's pages, in reading order, as an HTML list of absolute links
    (the 404 page is served at any address)."""
    prefix = app.config.notfound_urls_prefix
    items = []
    for name in toc_order(app):
        title = plain(app.builder.render_partial(app.env.titles[name])["title"])
        items.append(f'<li><a href="{prefix}{name}.html">{html.escape(title)}</a></li>')
    return '<ul class="not-found-contents">\n' + "\n".join(items) + "\n</ul>"


def toc_order(app):
    """The documents of the toctrees, depth first from the root."""
    order, seen = [], set()

    def walk(name):
        if name in seen or name not in app.env.titles:
            return
        seen.add(name)
        order.append(name)
        for child in app.env.toctree_includes.get(name, []):
            walk(child)

    walk(app.config.root_doc)
    return order


def not_found_page(app):
    """The 404 page's body: the search box and the contents (6), set as
    sphinx-notfound-page collects its page (after the environment is
    saved: a value set before would count as a change of configuration,
    and make the next build read every page again)."""
    if not app.config.findable:
        return []
    prefix = app.config.notfound_urls_prefix
    app.config.notfound_context = {
        "title": "Page not found",
        "body": (
            "<h1>Page not found</h1>\n"
            "<p>There is no page at this address: it may have moved. Search the "
            "book, or pick a page from its contents.</p>\n"
            f'<form class="not-found-search" action="{prefix}search.html" method="get" '
            'role="search">\n<label for="not-found-q">Search the book</label>\n'
            '<input type="search" id="not-found-q" name="q" '
            'placeholder="TBackward0 returned an invalid gradient" />\n'
            '<button type="submit">Search</button>\n</form>\n'
            "<h2>Contents</h2>\n" + contents_list(app)),
    }
    return []


def setup(app):
    # False: only the project's name (a build not published, such as the
    # teacher's pack, which loads none of the three extensions)
    app.add_config_value("findable", True, "html")
    # pages whose card shows the error; the chapter with the quick fix;
    # the chapter of every way out
    app.add_config_value("findable_error_cards",
                         ["book/intro", "book/01_reproduce_the_error"], "html")
    app.add_config_value("findable_quick_fix_on", "book/01_reproduce_the_error", "html")
    app.add_config_value("findable_ways_out", "book/04_every_way_out", "html")
    app.connect("config-inited", set_addresses, priority=900)
    # before sphinxext-opengraph (500), which reads the page's fields
    app.connect("html-page-context", page_tags, priority=400)
    app.connect("html-page-context", add_fix_pointer, priority=400)
    # before sphinx-notfound-page's (500)
    app.connect("html-collect-pages", not_found_page, priority=400)
    # before sphinx-external-toc's redirect (500), which keeps a file it finds
    app.connect("build-finished", write_root_page, priority=400)
    # before sphinx-sitemap's (500)
    app.connect("build-finished", complete_sitemap, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
