"""Reference pages of the docs site, written from the code at build time: the JobSpec from
its JSON schema, the REST API from the OpenAPI document, the CLI from its argparse parsers
and the settings from app.settings.Settings. docs/hooks/reference.py adds them to the site
(`mkdocs build`); nothing is committed, so they cannot drift. A lint-time tool: nothing
served imports it.
"""

from __future__ import annotations

from collections.abc import Callable

from tools.reference import cli, jobspec, openapi, settings

PAGES: dict[str, Callable[[], str]] = {
    "reference/jobspec.md": jobspec.page,
    "reference/rest-api.md": openapi.page,
    "reference/cli.md": cli.page,
    "reference/settings.md": settings.page,
}
"""Path in the site -> the function that writes its markdown."""
