"""`make lighthouse`: Lighthouse's performance and SEO scores of every
page, beside a fresh Jupyter Book template built with the same pins.

Both sites are served the same way, from 127.0.0.1 with gzip
(tools/serve.py). Lighthouse (the version pinned in package.json) runs with
its default mobile profile and simulated slow 4G, in the system Chromium,
three times per page; the median of each measure is kept. It writes
_build/lighthouse.md: per page the performance score, first and largest
contentful paint, the bytes transferred, and their ratio to the template's
intro page, and the SEO score (with the audits that failed, if any). Timings depend on the machine and its load: read the ratios,
not the seconds. Not part of `make test`.

    python -m tools.lighthouse [--runs 3] [--pages book/intro book/cheat_sheet]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.book import ROOT, toc_entries
from tools.serve import serve

BUILD = ROOT / "_build"
HTML = BUILD / "html"
TEMPLATE = BUILD / "lighthouse-template"
LIGHTHOUSE = ROOT / "node_modules" / ".bin" / "lighthouse"
REPORT = BUILD / "lighthouse.md"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"

HOW_TO_READ = """\
How to read this table. Lighthouse {version}, mobile profile (a mid-range
phone, simulated slow 4G: 150 ms round trip, 1.6 Mbit/s), in headless
Chromium; each site served from 127.0.0.1 with gzip. Each row is the median
of {runs} runs. *Score* is Lighthouse's performance score (0 to 1; 0.90 and
above is "good"). *First paint* and *largest paint* are the simulated first
and largest contentful paint; *bytes* is everything the page loads, as
transferred (gzip). The *x template* columns divide by the same measure of
the template's intro page (a fresh `jupyter-book create` book built with the
same pins, served the same way, measured in the same run): the seconds
depend on this machine and its load, the ratios much less. A score moves by
a few hundredths from run to run on a busy machine (the last column shows
each run's). The book aims at a score of 0.90 or more on every page, 0.95 on
the intro, the intro's first paint within 1.1 x the template's, and the
intro's bytes no more than the template's. *SEO* is Lighthouse's SEO score
(the median; the audits that failed in any run are named): 1.00 on every
page.
"""


def build_template():
    """A fresh `jupyter-book create` book, built with this venv's pins."""
    source = TEMPLATE / "book"
    if not (source / "_build" / "html" / "intro.html").is_file():
        shutil.rmtree(TEMPLATE, ignore_errors=True)
        TEMPLATE.mkdir(parents=True)
        subprocess.run([str(JUPYTER_BOOK), "create", str(source)], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([str(JUPYTER_BOOK), "build", "--quiet", str(source)],
                       check=True, stdout=subprocess.DEVNULL)
    return source / "_build" / "html"


def lighthouse_once(url, folder):
    out = Path(folder) / "report.json"
    subprocess.run(
        [str(LIGHTHOUSE), url, "--quiet", "--only-categories=performance,seo",
         "--output=json", f"--output-path={out}", f"--chrome-path={CHROMIUM}",
         "--chrome-flags=--headless=new --no-sandbox --disable-gpu"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = json.loads(out.read_text())
    audits = report["audits"]
    seo = report["categories"]["seo"]
    failed = sorted(ref["id"] for ref in seo["auditRefs"]
                    if ref.get("weight") and audits[ref["id"]]["score"] == 0)
    return {"score": report["categories"]["performance"]["score"],
            "seo": seo["score"], "seo_failed": failed,
            "fcp": audits["first-contentful-paint"]["numericValue"] / 1000,
            "lcp": audits["largest-contentful-paint"]["numericValue"] / 1000,
            "bytes": audits["total-byte-weight"]["numericValue"],
            "version": report["lighthouseVersion"]}


def measure(url, runs):
    with tempfile.TemporaryDirectory() as folder:
        results = [lighthouse_once(url, folder) for _ in range(runs)]
    row = {key: statistics.median(r[key] for r in results)
           for key in ("score", "fcp", "lcp", "bytes", "seo")}
    row["seo_failed"] = sorted({audit for r in results for audit in r["seo_failed"]})
    row["version"] = results[0]["version"]
    row["scores"] = [r["score"] for r in results]
    return row


def table(rows, template, runs):
    lines = [HOW_TO_READ.format(version=template["version"], runs=runs), "",
             "| page | score | first paint | x template | largest paint | "
             "x template | bytes (gzip) | x template | scores of the runs | SEO |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, row in [("template intro page", template)] + rows:
        lines.append(
            f"| {name} | {row['score']:.2f} | {row['fcp']:.1f} s | "
            f"{row['fcp'] / template['fcp']:.2f} | {row['lcp']:.1f} s | "
            f"{row['lcp'] / template['lcp']:.2f} | {row['bytes'] / 1024:,.0f} KiB | "
            f"{row['bytes'] / template['bytes']:.2f} | "
            f"{', '.join(f'{s:.2f}' for s in row['scores'])} | {row['seo']:.2f}"
            + (f" (failed: {', '.join(row['seo_failed'])})" if row["seo_failed"] else "")
            + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pages", nargs="*", default=toc_entries(),
                        help="pages of _toc.yml (default: every one)")
    args = parser.parse_args()
    if not LIGHTHOUSE.is_file():
        sys.exit("Lighthouse is not installed: run `npm ci` (make lighthouse does)")
    if not (HTML / "index.html").is_file():
        sys.exit("the book is not built: run `make book` first")
    template_html = build_template()
    book, template_site = serve(HTML), serve(template_html)
    try:
        print(f"template intro page ({args.runs} runs)", flush=True)
        template = measure(template_site.url + "intro.html", args.runs)
        rows = []
        for page in args.pages:
            print(f"{page} ({args.runs} runs)", flush=True)
            rows.append((page, measure(f"{book.url}{page}.html", args.runs)))
    finally:
        book.shutdown()
        template_site.shutdown()
    text = table(rows, template, args.runs)
    REPORT.write_text(text)
    print(text)
    print(f"Written to {REPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
