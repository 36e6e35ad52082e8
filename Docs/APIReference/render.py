"""Renders the OpenAPI document into one self-contained HTML page (scripts/api-docs).

Sphinx builds the page in a scratch folder; the page's stylesheets are then inlined and every
script element removed, so the gateway can serve the file alone under a policy that allows no
script and no other origin.
"""

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = pathlib.Path(__file__).resolve().parent


def render(spec: pathlib.Path, output: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        source = pathlib.Path(scratch, "source")
        build = pathlib.Path(scratch, "build")
        source.mkdir()
        for name in ("conf.py", "index.rst"):
            shutil.copy(HERE / name, source / name)
        document = yaml.safe_load(spec.read_text(encoding="utf-8"))
        fold_default_answers(document)
        (source / "openapi.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        # -W turns every warning into a failure: the page renders all of the document or nothing.
        subprocess.run(
            [sys.executable, "-m", "sphinx", "-q", "-W", "-b", "singlehtml", str(source), str(build)],
            check=True,
        )
        page = (build / "index.html").read_text(encoding="utf-8")
        page = inline_styles(page, build)
        extra = (HERE / "page.css").read_text(encoding="utf-8")
        page = page.replace("</head>", f"<style>\n{extra}</style>\n</head>", 1)
        page = re.sub(r"<script\b[^>]*>.*?</script>\s*", "", page, flags=re.S)
        page = re.sub(r'<link rel="(?:index|search|icon)"[^>]*>\s*', "", page)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page, encoding="utf-8")


def fold_default_answers(document: dict) -> None:
    """Moves each operation's `default` answer into its description.

    The HTTP domain sphinxcontrib-openapi writes into documents statuses only as numbers; the
    provider API routes answer "any other status" with the provider's own answer, which the
    page states in words under the operation.
    """
    shared = document.get("components", {}).get("responses", {})
    for item in document.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict) or "default" not in operation.get("responses", {}):
                continue
            answer = operation["responses"].pop("default")
            if "$ref" in answer:
                answer = shared[answer["$ref"].rsplit("/", 1)[1]]
            text = answer.get("description", "").strip()
            operation["description"] = (operation.get("description", "") + f"\n\nAny other status: {text}").strip()


def inline_styles(page: str, build: pathlib.Path) -> str:
    """Replaces each local stylesheet link with a <style> element holding the file."""

    def style(match: re.Match) -> str:
        css = load_css(build / match.group(1).split("?")[0], build)
        return f"<style>\n{css}\n</style>"

    return re.sub(r'<link rel="stylesheet"[^>]*href="([^"]+)"[^>]*/?>', style, page)


def load_css(path: pathlib.Path, build: pathlib.Path) -> str:
    """A stylesheet with its @import rules replaced by the imported files."""
    css = path.read_text(encoding="utf-8")
    return re.sub(
        r'@import url\("?([^")]+)"?\);',
        lambda m: load_css(path.parent / m.group(1), build),
        css,
    )


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--quiet"]
    render(pathlib.Path(arguments[0]), pathlib.Path(arguments[1]))
