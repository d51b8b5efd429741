"""Whether a Hugging Face model id can be loaded on this machine, asked in seconds.

`from_pretrained` on an id that is neither in the local Hugging Face cache nor reachable
retries its downloads with back-off (1+2+4+8+8 s per file, twice over for tokenizer and
model: 46 s measured here) before it fails. This asks once, with a short timeout: is the
id's config.json in this machine's cache, and if not, does the hub answer for it. The API
asks it at submit and the worker before it loads. Needs huggingface_hub, never torch.
"""

from __future__ import annotations

import httpx2
from huggingface_hub import HfApi, constants, try_to_load_from_cache
from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError

HUB_PROBE_TIMEOUT_S = 5.0
"""How long the hub gets to answer for an id before it counts as unreachable."""


def is_cached(repo_id: str) -> bool:
    """Whether this machine's Hugging Face cache holds the id's config.json."""
    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def hub_model_problem(repo_id: str, *, timeout: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """Why `repo_id` cannot be loaded from this machine (None: it is cached, or the hub has
    it), worded for the person who wrote the id."""
    try:
        if is_cached(repo_id):
            return None
    except HFValidationError as exc:  # the hub's own rules, stricter than an org/name shape
        return f"{repo_id!r} is not a valid Hugging Face model id: {exc}"
    fixes = f"download it first (`hf download {repo_id}`) or point `model` at a local directory"
    if constants.HF_HUB_OFFLINE:
        return (
            f"Hugging Face model {repo_id!r} is not in this machine's cache and HF_HUB_OFFLINE "
            f"is set: {fixes}"
        )
    try:
        HfApi().model_info(repo_id, timeout=timeout)
    except GatedRepoError:
        return (
            f"Hugging Face model {repo_id!r} is gated: accept its licence on the hub and set "
            "HF_TOKEN"
        )
    except RepositoryNotFoundError:
        return (
            f"Hugging Face model {repo_id!r} does not exist on the hub (or is private: set "
            "HF_TOKEN); check the spelling"
        )
    except (OSError, httpx2.HTTPError) as exc:
        return (
            f"Hugging Face model {repo_id!r} is not in this machine's cache and the hub is "
            f"unreachable ({type(exc).__name__}): {fixes}"
        )
    return None
