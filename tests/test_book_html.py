"""The Colab badge is built from the repository setting."""

import pytest

from book._ext.book_html import colab_url


def test_colab_url_points_at_the_notebook_on_github():
    assert colab_url("https://github.com/me/book", "main", "",
                     "book/01_reproduce_the_error") == (
        "https://colab.research.google.com/github/me/book/blob/main/"
        "book/01_reproduce_the_error.ipynb")
    assert colab_url("https://github.com/me/book/", "dev", "docs", "book/x") == (
        "https://colab.research.google.com/github/me/book/blob/dev/docs/book/x.ipynb")


def test_colab_url_refuses_a_non_github_repository():
    with pytest.raises(ValueError, match="must start with https://github.com/"):
        colab_url("https://gitlab.com/me/book", "main", "", "book/x")


def light_pages():
    """book/_ext/light_pages.py, as Sphinx loads it (by its file)."""
    from tools.book import book_extension

    return book_extension("light_pages")


def test_aligned_outputs_are_told_from_prose():
    from book._ext.output_shapes import is_aligned

    table = ("way out     works  advice\n"
             "del_x       yes    no\n"
             "set_        yes    no\n")
    assert is_aligned(table)
    assert is_aligned("  124  TORCH_API void f(\n  125      int x);\n")
    assert not is_aligned("The first difference is rounding. The second is real:\n"
                          "a neuron that varies carries information.\n")
    # one padded line is not a table
    assert not is_aligned("accuracy:  97.2\nthe end of a sentence.\n")


def test_formulas_become_mathml_or_stop_the_build():
    from tools.book import book_extension

    tex_to_mathml = book_extension("mathml").tex_to_mathml
    inline = tex_to_mathml(r"\sigma_j^2 \lVert W_{\ell+1}[:, j]\rVert^2", display=False)
    assert inline.startswith("<math") and "\\" not in inline
    display = tex_to_mathml(r"\begin{aligned}a &= b \\ &\quad + \bigl\lVert c \bigr\rVert"
                            r"\end{aligned}", display=True)
    assert "<mtable" in display and "\\" not in display
    with pytest.raises(ValueError, match="left TeX"):
        tex_to_mathml(r"\unknowncommand x", display=False)


def test_inline_code_breaks_before_a_dot_and_after_a_slash_only():
    module = light_pages()
    html = ('<code class="docutils literal notranslate"><span class="pre">'
            'torch.nn.utils.prune</span> <span class="pre">&quot;a/b&quot;</span>'
            ' <span class="pre">.data</span> <span class="pre">w[0].grad...</span></code>')
    out = module.INLINE_CODE.sub(module.breakable_code, html)
    assert out.count("<wbr>") == 5
    assert "torch<wbr>.nn<wbr>.utils<wbr>.prune" in out and "a/<wbr>b" in out
    # a leading dot (an attribute named alone) and an ellipsis never break
    assert '"pre">.data<' in out and "w[0]<wbr>.grad...<" in out
    assert 'class="pre"' in out and "&quot;" in out  # tags and entities untouched


def test_the_sidebar_toggle_is_named_after_its_page():
    module = light_pages()
    html = ('<li class="toctree-l1 current has-children"><a class="current reference internal" '
            'href="#">Teacher’s <code>guide</code></a><details open="open"><summary>'
            '<span class="toctree-toggle" role="presentation"><svg aria-hidden="true"></svg>'
            '</span></summary><ul></ul></details></li>'
            '<li><a class="reference internal" href="x.html">No pages under it</a></li>')
    out = module.TOC_TOGGLE.sub(module.named_toggle, html)
    assert out.count("<summary") == 1
    assert '<summary aria-label="Pages under: Teacher’s guide">' in out
    assert out.replace(' aria-label="Pages under: Teacher’s guide"', "") == html


def test_boxes_that_may_scroll_are_written_focusable_once():
    module = light_pages()
    html = ('<div class="cell_output docutils container">'
            '<div class="output stream highlight-myst-ansi notranslate"><div class="highlight">'
            '<pre>x</pre></div></div></div>'
            '<div class="pst-scrollable-table-container"><table></table></div>'
            '<div class="outputs"></div><pre tabindex="-1">y</pre>')
    out = module.FOCUSABLE_BOX.sub(r'<\1 tabindex="0"', html)
    assert out.count('tabindex="0"') == 3
    assert '<div tabindex="0" class="output stream' in out
    assert '<div class="outputs">' in out and '<pre tabindex="-1">' in out
    assert module.FOCUSABLE_BOX.sub(r'<\1 tabindex="0"', out) == out  # once only
