"""Checks the rendered API reference page (scripts/api-docs) against the OpenAPI document.

Every operation of the document must be on the page (sphinxcontrib-openapi gives each an
anchor `method--path`), and the page must stand alone: no script, no stylesheet or image
fetched from anywhere, so /docs works under its policy of `default-src 'none'`.
Usage: check_reference_page.py OPENAPI_YAML PAGE_HTML
"""

import re
import sys

import yaml

METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}


def main(spec_path: str, page_path: str) -> int:
    spec = yaml.safe_load(open(spec_path, encoding="utf-8"))
    page = open(page_path, encoding="utf-8").read()
    anchors = set(re.findall(r'<dt class="sig sig-object http" id="([^"]+)"', page))
    # Each operation's entry, from its anchor to the next one: it must list its answers.
    entries = dict(re.findall(r'<dt class="sig sig-object http" id="([^"]+)"(.*?)(?=<dt class="sig sig-object http"|\Z)', page, re.S))
    failures = []
    operations = 0
    for path, item in spec["paths"].items():
        for method in METHODS & item.keys():
            operations += 1
            anchor = f"{method}-" + re.sub(r"[{}]", "", path).replace("/", "-")
            if anchor not in anchors:
                failures.append(f"{method.upper()} {path} is not on the page (no #{anchor})")
            elif "Status Codes" not in entries.get(anchor, "") or "500" not in entries.get(anchor, ""):
                failures.append(f"{method.upper()} {path} is on the page without its answers")
    for pattern, what in [
        (r"<script\b", "a script element"),
        (r"<link\b[^>]*rel=\"?stylesheet", "a linked stylesheet"),
        (r"@import\b", "a CSS @import"),
        (r"\son[a-z]+\s*=", "an inline event handler"),
        (r"\bsrc=\"(?!data:)", "an element loading a resource"),
        (r"url\((?!\"?data:)", "a CSS url() outside data:"),
    ]:
        if re.search(pattern, page):
            failures.append(f"the page has {what}: it must stand alone")
    if "dl.field-list > dt" not in page:
        failures.append("the page's own stylesheet (Docs/APIReference/page.css) is not inlined")
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"API reference page: {operations} operations, {len(anchors)} on the page, {len(failures)} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
