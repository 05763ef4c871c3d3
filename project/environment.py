"""Settings of the example site read from the environment, with safe defaults."""

from __future__ import annotations

import os
import secrets

from project.database import data_dir


def secret_key() -> str:
    """Return the site's secret key: made at random on first use, kept in the data folder.

    No key is written in the source, so no two installations share one; the file is
    readable by its owner only. ``DJANGO_SECRET_KEY`` overrides it.
    """
    path = data_dir() / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(50)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_text().strip()
    with os.fdopen(descriptor, "w") as file:
        file.write(key)
    return key


def throttle_rates(**defaults: str) -> dict[str, str]:
    """Return DRF rates of the app's scopes: ``retrieval_<scope>`` for each default.

    ``RETRIEVAL_THROTTLE_<SCOPE>`` (e.g. ``RETRIEVAL_THROTTLE_SEARCH=120/min``) replaces a
    default; ``off`` leaves that scope unthrottled.
    """
    rates = {}
    for scope, default in defaults.items():
        rate = os.environ.get(f"RETRIEVAL_THROTTLE_{scope.upper()}", default)
        if rate and rate != "off":
            rates[f"retrieval_{scope}"] = rate
    return rates
