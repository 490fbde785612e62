"""The classroom handouts of the public book, printed from the built book
(`make book`, which `make test` runs first) by headless Chromium at A4 and
at Letter, fit the pages each one promises; printed, they show no site
navigation. The assessment, its answers and the run sheets are in the
teacher's pack: tests/test_teacher_pack.py prints them."""
import re

import pytest

from tools.downloads import HTML

# page: how many pages it may take, printed
HANDOUTS = {"worksheet_nine_variants": 1, "worksheet_ways_out": 1,
            "worksheet_four_reports": 1, "colab_in_a_classroom": 1}
PAPER = ["A4", "Letter"]



def printed_pages(browser, page_name, paper):
    """The number of pages of `page_name` printed to PDF on `paper`, and the
    printed text's navigation, if any shows."""
    path = HTML / "book" / f"{page_name}.html"
    assert path.is_file(), f"{path} was not built: run make book"
    page = browser.new_page()
    page.goto(path.as_uri())
    page.emulate_media(media="print")
    shown = page.evaluate("""() => [...document.querySelectorAll(
        '.bd-sidebar-primary, .bd-header, .prev-next-area, .bd-footer')]
        .filter(e => e.offsetParent !== null).map(e => e.className)""")
    pdf = page.pdf(format=paper, print_background=False)
    page.close()
    return len(re.findall(rb"/Type\s*/Page[^s]", pdf)), shown


@pytest.mark.parametrize("paper", PAPER)
@pytest.mark.parametrize("page_name", list(HANDOUTS))
def test_each_handout_fits_its_pages(browser, page_name, paper):
    pages, shown = printed_pages(browser, page_name, paper)
    assert 1 <= pages <= HANDOUTS[page_name], f"{page_name} prints on {pages} {paper} pages"
    assert shown == [], "printed, a handout shows no navigation"


def test_a_page_too_long_is_found(browser):
    """The check above on a planted case: chapter 1, many pages long."""
    pages, _ = printed_pages(browser, "01_reproduce_the_error", "A4")
    assert pages > 2
