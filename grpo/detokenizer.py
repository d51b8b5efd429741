"""Completion token ids back to text: whole texts for the rewards, and the piece of text each
token adds, for views that shade a completion token by token (per-token KL).

Decoding a token alone is wrong for many tokenizers: SentencePiece drops a word's leading
space, a byte-level token can hold half of a character. A token's piece here is what it adds
to the text decoded so far (with a few tokens of left context), so the pieces of a
completion join back to its decoded text. Knows nothing of models, rewards or storage.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

CONTEXT_TOKENS = 4
"""Left context a piece is decoded with: enough for a leading space or a split character."""
REPLACEMENT = "\ufffd"


def token_pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The text each token adds (special tokens add ""); "".join(pieces) is the decoded text.

    A token that ends inside a multi-byte character (the text so far ends in U+FFFD) adds ""
    and the token that completes the character adds all of it (UTF-8: at most 4 tokens).
    """
    pieces: list[str] = []
    done = 0  # ids[:done] are fully in the pieces so far
    for k in range(len(ids)):
        start = max(0, done - CONTEXT_TOKENS)
        before = _decode(tokenizer, ids[start:done])
        after = _decode(tokenizer, ids[start : k + 1])
        if after.endswith(REPLACEMENT) and k + 1 < len(ids) and k + 1 - done < 4:
            pieces.append("")
            continue
        pieces.append(after[len(os.path.commonprefix([before, after])) :])
        done = k + 1
    return pieces


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return str(tokenizer.decode(list(ids), skip_special_tokens=True)) if len(ids) else ""
