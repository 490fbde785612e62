"""Sphinx extension for this book's HTML pages.

1. An "Open in Colab" badge under each chapter's title.

The link is built from `repository.url`, `repository.branch` and
`repository.path_to_book` in _config.yml, so the repository address is
written in one place. The badge is drawn inline (no external image).

2. Each script tag once: sphinx-thebe 0.3.1 registers its configuration
   script twice under Jupyter Book 1.0, and the second copy fails in the
   browser ("Identifier 'THEBE_JS_URL' has already been declared").
"""
from pathlib import PurePosixPath

from docutils import nodes

BADGE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20" '
    'role="img" aria-label="Open in Colab">'
    '<rect width="117" height="20" rx="3" fill="#555"/>'
    '<rect x="20" width="97" height="20" rx="3" fill="#f9ab00"/>'
    '<rect x="20" width="6" height="20" fill="#f9ab00"/>'
    '<circle cx="10" cy="10" r="5" fill="none" stroke="#f9ab00" '
    'stroke-width="2.5"/>'
    '<text x="68" y="14" fill="#222" font-family="Verdana,sans-serif" '
    'font-size="11" text-anchor="middle">Open in Colab</text></svg>'
)


def colab_url(repository_url, branch, path_to_book, docname):
    """Colab's address for the notebook `docname` of a GitHub repository."""
    prefix = "https://github.com/"
    if not repository_url.startswith(prefix):
        raise ValueError(f"repository.url must start with {prefix}, got "
                         f"{repository_url!r}")
    owner_repo = repository_url[len(prefix):].strip("/")
    path = PurePosixPath(path_to_book or "") / f"{docname}.ipynb"
    return (f"https://colab.research.google.com/github/{owner_repo}/blob/"
            f"{branch}/{path.as_posix()}")


def add_badge(app, doctree):
    """Insert the badge after the first title of every notebook page."""
    docname = app.env.docname
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    options = app.config.html_theme_options
    url = colab_url(options.get("repository_url", ""),
                    options.get("repository_branch", "main"),
                    options.get("path_to_docs", ""), docname)
    html = (f'<p class="colab-badge"><a href="{url}" target="_blank" '
            f'rel="noopener">{BADGE_SVG}</a></p>')
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        if title is not None:
            title.parent.insert(title.parent.index(title) + 1,
                                nodes.raw("", html, format="html"))
            return


def drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    """Keep the first of several identical script tags of a page."""
    if not all(hasattr(s, "attributes") for s in context.get("script_files", [])):
        return
    scripts, seen = [], set()
    for script in context.get("script_files", []):
        # The same script is registered once with filename None, once with "".
        key = (str(script.filename or ""), script.priority,
               tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            scripts.append(script)
    # In place: extensions that run later (MathJax) add to this very list.
    context["script_files"][:] = scripts


def setup(app):
    app.connect("doctree-read", add_badge)
    app.connect("html-page-context", drop_duplicate_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
