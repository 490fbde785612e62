"""The Colab badge is built from the repository setting."""
import sys

import pytest

from tools.book import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from book_html import colab_url  # noqa: E402


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
