#!/usr/bin/env python3
"""Fail on a broken internal link: in the built guide (every <a href> of docs/book/**/*.html to a
page that is not there, or to an #anchor its page does not have) and in README.md (a relative
link to a file that is not in the repository).

Usage: scripts/check-links.py [BOOK_DIR]   (default: docs/book; run `mdbook build docs` first)
External links (http:, https:, mailto:) are not fetched: CI runs offline from them.
"""
import html.parser
import pathlib
import re
import sys
import urllib.parse

REPO = pathlib.Path(__file__).resolve().parent.parent


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def external(href):
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href) is not None


def check_book(book):
    pages = {}
    for path in sorted(book.rglob("*.html")):
        p = Page()
        p.feed(path.read_text(encoding="utf-8", errors="replace"))
        pages[path.resolve()] = p
    if not pages:
        return [f"{book}: no HTML pages (run `mdbook build docs` first)"]
    broken = []
    for path, page in pages.items():
        for href in page.hrefs:
            if external(href):
                continue
            url = urllib.parse.urlsplit(href)
            target = path if not url.path else (path.parent / urllib.parse.unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = path.relative_to(book.resolve())
            if not target.exists():
                broken.append(f"{where}: link to a missing page: {href}")
                continue
            if url.fragment and target in pages and url.fragment not in pages[target].ids:
                broken.append(f"{where}: link to a missing anchor: {href}")
    return broken


def check_readme():
    broken = []
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for href in re.findall(r"\]\(([^)\s]+)\)", text):
        if external(href) or href.startswith("#"):
            continue
        path = urllib.parse.urlsplit(href).path
        if not (REPO / path).exists():
            broken.append(f"README.md: link to a missing file: {href}")
    return broken


def main():
    book = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "book"
    broken = check_book(book) + check_readme()
    for b in broken:
        print(b, file=sys.stderr)
    if broken:
        print(f"check-links: {len(broken)} broken links", file=sys.stderr)
        return 1
    pages = len(list(book.rglob("*.html")))
    print(f"check-links: {pages} pages and README.md, every internal link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
