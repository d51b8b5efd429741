"""MkDocs hook: adds the reference pages, written from the code at build time
(tools/reference/), to the site's files. Registered in mkdocs.yml under `hooks:`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `tools` is not an installed package
    sys.path.insert(0, str(ROOT))

from tools.reference import PAGES  # noqa: E402


def on_files(files: Files, config: Any) -> Files:
    for path, write in PAGES.items():
        files.append(File.generated(config, path, content=write()))
    return files
