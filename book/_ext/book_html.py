"""Sphinx extension for this book's HTML pages.

1. An "Open in Colab" badge under each chapter's title.

The link is built from `repository.url`, `repository.branch` and
`repository.path_to_book` in _config.yml, so the repository address is
written in one place. The badge is drawn inline (no external image).

2. `{{ torch_pin }}` in the pages: the torch release the stored outputs
   were made with, read from requirements.txt (its one place) by tools.book.

3. Each script tag once: sphinx-thebe 0.3.1 registers its configuration
   script twice under Jupyter Book 1.0, and the second copy fails in the
   browser ("Identifier 'THEBE_JS_URL' has already been declared").

4. What each page loads: only what it shows (light_pages.py, icons.py and
   book/_templates/); formulas as MathML (mathml.py); text
   outputs laid out in columns keep them (output_shapes.py); the book's
   PDF and notebooks linked from each page, and printing with every fold
   open (downloads.py).

5. What a search engine and a link preview read: descriptions, canonical
   links, cards, the root and 404 pages, a pointer to the fix on each
   chapter (findable.py).

6. Each claim's marker links the cell that shows it (claim_links.py).
"""
import importlib.util
import re
from pathlib import Path, PurePosixPath

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
            f'rel="noopener">{BADGE_SVG}</a>{student_link(app, docname)}</p>')
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        if title is not None:
            title.parent.insert(title.parent.index(title) + 1,
                                nodes.raw("", html, format="html"))
            return


def student_docname(docname):
    """'book/01_x' -> 'book/student/01_x': the chapter's student edition."""
    path = PurePosixPath(docname)
    return (path.parent / "student" / path.name).as_posix()


def student_colab_url(app, docname):
    """Colab's address for the student edition of chapter `docname`."""
    options = app.config.html_theme_options
    return colab_url(options.get("repository_url", ""),
                     options.get("repository_branch", "main"),
                     options.get("path_to_docs", ""), student_docname(docname))


def student_link(app, docname):
    """A link to the chapter's student edition in Colab, if there is one."""
    if not (Path(app.srcdir) / f"{student_docname(docname)}.ipynb").is_file():
        return ""
    return (f' <a class="colab-student" href="{student_colab_url(app, docname)}" '
            'target="_blank" rel="noopener">Student edition in Colab '
            '(answers left to you)</a>')


def student_colab_role(name, rawtext, text, lineno, inliner, options=None,
                       content=None):
    """{student-colab}`text <book/01_name>`: link to a student notebook in Colab."""
    app = inliner.document.settings.env.app
    match = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", text)
    label, docname = (match[1], match[2]) if match else (None, text.strip())
    if not (Path(app.srcdir) / f"{student_docname(docname)}.ipynb").is_file():
        message = inliner.reporter.error(
            f"no student edition of {docname!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    url = student_colab_url(app, docname)
    return [nodes.reference(rawtext, label or PurePosixPath(docname).name,
                            refuri=url)], []


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


def keep_the_navbar_off(app, config):
    """One set of sidebar buttons, the theme's own: the phone menu works.

    sphinx-book-theme 1.3.0 turns pydata-sphinx-theme's top navbar off by
    leaving `navbar_persistent` (and the other navbar slots) empty in its
    theme.conf. pydata-sphinx-theme 0.17.1 fills `navbar_persistent` with a
    search field whenever the user's options do not name it, which brings the
    navbar back: an empty bar with a second search box, and a second pair of
    `.primary-toggle` / `.secondary-toggle` buttons before the book theme's
    own. The theme's script binds `document.querySelector(...)`, the first,
    hidden pair, so the visible menu and contents buttons open nothing.
    Upstream: pydata-sphinx-theme issue 2451, sphinx-book-theme issue 988
    (fixes proposed in its pull requests 991 and 1000). Naming the option,
    empty, as the book theme means it, keeps the navbar off.
    """
    options = config.html_theme_options
    if options is None:
        config.html_theme_options = options = {}
    options.setdefault("navbar_persistent", [])


def book_facts_module(root):
    """tools/book.py of the repository at `root`, loaded from its file (the
    extension runs inside Sphinx, where the repository is not importable)."""
    spec = importlib.util.spec_from_file_location(
        "book_facts", Path(root) / "tools" / "book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def add_substitutions(app, config):
    """{{ torch_pin }}: requirements.txt's torch pin, for the pages' prose."""
    facts = book_facts_module(app.confdir)
    config.myst_substitutions = {**(config.myst_substitutions or {}),
                                 "torch_pin": facts.torch_pin()}


def setup(app):
    # What a page loads, and outputs that keep their columns (beside this file).
    app.setup_extension("light_pages")
    app.setup_extension("mathml")
    app.setup_extension("output_shapes")
    # the book's PDF and notebooks in each page's download menu (beside this file)
    app.setup_extension("downloads")
    app.setup_extension("findable")
    app.setup_extension("claim_links")
    app.connect("config-inited", keep_the_navbar_off)
    app.connect("config-inited", add_substitutions)
    app.connect("doctree-read", add_badge)
    app.add_role("student-colab", student_colab_role)
    app.connect("html-page-context", drop_duplicate_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
