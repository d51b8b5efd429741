"""Completion token ids back to text: whole texts for the rewards, and the piece of text each
token adds, for views that shade a completion token by token (per-token KL).

Decoding a token alone is right when the lone decodes join back to the completion's text
(character and most byte-level BPE text), and then it is cheap: each token id is decoded
once per tokenizer. Otherwise (SentencePiece drops a word's leading space, a byte-level
token can hold half of a character) a token's piece is what it adds to the text decoded so
far, with a few tokens of left context: two decodes a token, which is why it is only the
fallback (the pieces are built inside the training step). Either way the pieces of a
completion join back to its decoded text. Knows nothing of models, rewards or storage.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any

CONTEXT_TOKENS = 4
"""Left context a piece is decoded with: enough for a leading space or a split character."""
REPLACEMENT = "\ufffd"
_LONE: weakref.WeakKeyDictionary[Any, dict[int, str]] = weakref.WeakKeyDictionary()
"""Per tokenizer: token id -> its text decoded alone."""


def token_pieces(tokenizer: Any, ids: Sequence[int], *, text: str | None = None) -> list[str]:
    """The text each token adds (special tokens add ""); "".join(pieces) is the decoded text.

    `text`, the completion decoded whole, lets the lone decodes be used when they join to it.
    """
    if text is not None:
        pieces = [_lone(tokenizer, i) for i in ids]
        if "".join(pieces) == text:
            return pieces
    return _pieces_in_context(tokenizer, ids)


def _lone(tokenizer: Any, token_id: int) -> str:
    known = _LONE.setdefault(tokenizer, {})
    if token_id not in known:
        known[token_id] = _decode(tokenizer, [token_id])
    return known[token_id]


def _pieces_in_context(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """What each token adds to the text decoded before it, with left context.

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
