"""Shared fixtures: the toc's notebooks, read once."""
import nbformat
import pytest

from tools.book import toc_notebooks


@pytest.fixture(scope="session")
def notebooks():
    """{path: notebook} for every notebook in _toc.yml."""
    return {path: nbformat.read(path, as_version=4) for path in toc_notebooks()}
