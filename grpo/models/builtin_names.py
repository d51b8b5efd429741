"""Where each built-in model lives in the cache directory, without torch.

A built-in is built once per machine into `<cache>/<name>-<versions>` (grpo/models/loading.py
materialises it); each version below names the recipe that builds it, so a change of recipe
is a new directory, never a stale model. They live here, not beside their recipes, so that
what only needs the directory (`grpo vllm-serve`, which then starts vLLM's server and its own
torch; the nodes of a run comparing their caches) finds it without importing torch and
transformers, about 5 s of CPU. Knows nothing of GRPO.
"""

from __future__ import annotations

from pathlib import Path

TINY_VERSION = "v2"
"""builtin:tiny (grpo/models/loading.py): bump when its architecture or initialisation changes."""
SMALL_VERSION = "v2"
"""builtin:small (grpo/models/builtin_small.py): bump when the architecture, the tokenizer's
corpus or chat template, or the initialisation changes (v2: the chat template renders tools)."""
RECIPE_VERSION = "v2"
"""builtin:tiny-arith's warm-up (grpo/models/warmup.py): bump whenever the warm-up, the arith
task or the tiny model changes."""
SMALL_ARITH_VERSION = "v1"
"""builtin:small-arith's warm-up (grpo/models/small_warmup.py): bump whenever it, the arith
task or builtin:small changes."""
TOOLS_RECIPE_VERSION = "v2"
"""builtin:tiny-tools' warm-up (grpo/models/tool_warmup.py): bump whenever it, the tools task
or the tool template changes."""


def builtin_dir_name(name: str) -> str:
    """The directory under the cache dir that holds built-in model `name` once built (what
    the nodes of a run on several machines compare: worker/shared_storage.py)."""
    match name:
        case "builtin:small":
            return f"builtin-small-{SMALL_VERSION}"
        case "builtin:small-arith":
            return f"builtin-small-arith-{SMALL_VERSION}-{SMALL_ARITH_VERSION}"
        case "builtin:tiny":
            return f"builtin-tiny-{TINY_VERSION}"
        case "builtin:tiny-arith":
            return f"builtin-tiny-arith-{RECIPE_VERSION}"
        case "builtin:tiny-tools":
            return f"builtin-tiny-tools-{TOOLS_RECIPE_VERSION}"
    raise ValueError(f"unknown built-in model {name!r}")


def is_built(directory: Path) -> bool:
    """Whether a built-in's directory is complete: loading.py's materialise renames it into
    place whole, config.json and all, so its config.json is there only once it is."""
    return (directory / "config.json").is_file()


def built_builtin_dir(name: str, cache_dir: Path) -> Path | None:
    """The directory of built-in `name` when this machine has built it, else None (a hub
    id, a local path, or a built-in not built yet: grpo/models/loading.py resolves those)."""
    try:
        directory = cache_dir / builtin_dir_name(name)
    except ValueError:
        return None  # not a built-in's name: loading.py says what it is, or what is wrong
    return directory if is_built(directory) else None
