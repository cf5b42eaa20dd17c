"""The documentation builds, and its links lead somewhere.

The guides in ``docs/`` and the API reference generated from the docstrings
must build with ``mkdocs build --strict`` (every warning an error: a broken
link or anchor, a docstring griffe cannot parse, a public name that cannot be
found); every relative link in README.md and the guides must name a file of
the repository.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    ROOT / "benchmarks" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]

# [text](target) or [text](<target>); the target up to its anchor
_LINK = re.compile(r"\[[^\]]*\]\(\s*(?:<([^>#]*)|([^)\s#]*))")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file (no URLs, no bare anchors)."""
    text = _CODE.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
    targets = [match.group(1) or match.group(2) for match in _LINK.finditer(text)]
    return [t for t in targets if t and not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def test_docs_build_strict(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}"
    api = (tmp_path / "api" / "index.html").read_text(encoding="utf-8")
    # the settings table's signatures and Args reach the reference
    # (docs/_griffe/settings_signatures.py): each class lists its own
    from jaxboost.frontends.settings.settings_table import settings_of

    classes = ("Booster", "Regressor", "Classifier", "Ranker", "load")
    starts = [api.index(f'id="jaxboost.{name}"') for name in classes]
    for name, start, end in zip(classes, starts, starts[1:]):
        listed = re.findall(r"<b><code>(\w+)</code></b>", api[start:end])
        settings = [setting.name for setting in settings_of(name)]
        assert listed[: len(settings)] == settings, name


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_lead_to_files(path: Path) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing"
    missing = [
        target for target in relative_links(path) if not (path.parent / target).resolve().exists()
    ]
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"


def test_relative_links_skip_urls_anchors_and_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "see [a](docs/a.md#x), `[b](no.md)`, [c](https://x.org), [d](#top)\n"
        "```\n[e](fenced.md)\n```\n[f](<other file.md>)\n",
        encoding="utf-8",
    )
    assert relative_links(page) == ["docs/a.md", "other file.md"]


# a Sphinx role (":func:`name`"), which mkdocstrings shows as it is written
_SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|meth|attr|obj|exc|ref|const):`")


def test_docstrings_use_markdown_not_sphinx_roles() -> None:
    sources = [*sorted((ROOT / "jaxboost").rglob("*.py")), *sorted((ROOT / "losses").rglob("*.py"))]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _SPHINX_ROLE.search(line)
    ]
    assert not found, f"Sphinx roles in docstrings (write `name` instead): {found}"
