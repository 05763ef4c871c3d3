"""axe-core in the screen tests: inject the pinned copy ``dev.py`` fetched, list what it finds.

``python3 dev.py test`` downloads axe-core once into ``.cache/`` (git ignores it); the tests
never touch the network. Without the file the accessibility tests fail, saying so.
"""

from __future__ import annotations

import os
from pathlib import Path

import dev
from tests.support.browser import ARTIFACTS

SERIOUS = ("serious", "critical")
#: The widths the admin is checked at: a laptop and a phone.
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


def axe_script() -> Path:
    """Return the path of axe.min.js; fail, naming the command, when it was never fetched."""
    path = dev.AXE_DIR / "axe.min.js"
    if not path.exists():
        raise AssertionError(
            f"axe-core is missing ({path}): run `python3 dev.py test` once "
            "(or `python3 -c 'import dev; dev.ensure_axe()'`) to fetch it."
        )
    return path


#: Django admin's own markup, left out of the checks: the app does not write it. On Django
#: 5.2 axe-core finds there ``link-in-text-block`` (the breadcrumbs' white links in light blue
#: text), ``label-title-only`` (the changelist search box with ``search_help_text``) and
#: ``aria-input-field-name`` (the autocomplete widget's select2 box).
DJANGO_OWN = ("#header", ".breadcrumbs", "#nav-sidebar", "#changelist-search", ".select2-container")


def axe_violations(
    page, *, impacts: tuple[str, ...] = SERIOUS, exclude: tuple[str, ...] = DJANGO_OWN
) -> list[dict]:
    """Run axe-core on ``page``; return its violations of ``impacts``, each with its targets."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_script()))
    violations = page.evaluate(
        "async exclude => (await axe.run({exclude: exclude.map(s => [s])},"
        " {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " targets: v.nodes.map(n => n.target.join(' '))}))",
        [s for s in exclude if page.locator(s).count()],
    )
    return [v for v in violations if v["impact"] in impacts]


def overflow(page) -> int:
    """Return how many CSS pixels the page is wider than its viewport (0: no sideways scroll)."""
    return page.evaluate("Math.max(0, document.documentElement.scrollWidth - window.innerWidth)")


def contrast(colour: str, background: str = "#ffffff") -> float:
    """Return the WCAG contrast ratio of two ``#rrggbb`` colours."""

    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(colour), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def doc_screenshot(page, name: str) -> Path:
    """Save a full-page screenshot for the docs and return its path.

    It goes to ``test-artifacts/screenshots/``; with ``RETRIEVAL_DOC_SCREENSHOTS=1`` to
    ``docs/_static/screenshots/`` instead, to be committed on purpose (a PNG differs from run
    to run, so the tests never write into the tracked tree by default).
    """
    if os.environ.get("RETRIEVAL_DOC_SCREENSHOTS"):
        folder = dev.ROOT / "docs" / "_static" / "screenshots"
    else:
        folder = ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
