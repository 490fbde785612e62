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
