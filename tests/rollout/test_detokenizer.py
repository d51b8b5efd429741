"""Each completion token's piece of text (grpo/models/detokenizer.py): the pieces join back to the
decoded text for the built-in character tokenizer, a byte-level BPE with characters split
across tokens, and a SentencePiece-style tokenizer whose lone tokens lose their space."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.models.detokenizer import token_pieces
from grpo.rollout.rollout import Rollout, decode_completions


def char_rollout(tokenizer: PreTrainedTokenizerFast, texts: list[str]) -> Rollout:
    """One prompt, one completion per text, each ending in EOS, right-padded."""
    rows = [
        tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        for t in texts
    ]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    prompt = torch.ones(1, 1, dtype=torch.long)
    return Rollout(
        prompt, prompt, ids, mask, torch.zeros(len(rows), dtype=torch.bool), mask.float()
    )


def test_char_tokenizer_pieces_are_the_characters_and_join_back_to_the_text() -> None:
    tokenizer = build_char_tokenizer()
    rollout = char_rollout(tokenizer, ["12 + 3 = 15", " a\nb "])
    texts = decode_completions(tokenizer, rollout)
    assert texts == ["12 + 3 = 15", " a\nb "]
    for i, text in enumerate(texts):
        pieces = token_pieces(tokenizer, rollout.completion_ids[i, : rollout.lengths[i]].tolist())
        assert pieces == [*text, ""]  # one piece per token; EOS adds no text
        assert "".join(pieces) == text


def test_byte_level_pieces_hold_a_split_character_on_the_token_that_completes_it() -> None:
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=270, initial_alphabet=alphabet, special_tokens=["</s>"]
    )
    backend.train_from_iterator(["hello world", "hello there"], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>")
    ids = tokenizer("hello 日 wörld")["input_ids"] + [tokenizer.eos_token_id]
    assert tokenizer.decode(ids[2:3]) == "\ufffd"  # 日 is three byte tokens: alone, each is junk

    pieces = token_pieces(tokenizer, ids)
    assert len(pieces) == len(ids)
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True) == "hello 日 wörld"
    assert pieces[:5] == ["hello", " ", "", "", "日"]
    assert "\ufffd" not in "".join(pieces)


def test_sentencepiece_style_pieces_keep_the_space_a_lone_token_loses() -> None:
    vocab = {"<unk>": 0, "</s>": 1, "▁hello": 2, "▁world": 3, "!": 4}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="</s>", unk_token="<unk>"
    )
    ids = [2, 3, 4, 3, 1]
    assert tokenizer.decode([3]) == "world"  # why pieces are not decoded one token at a time

    assert token_pieces(tokenizer, ids) == ["hello", " world", "!", " world", ""]


@pytest.mark.parametrize("ids", [[], [1]])
def test_no_text_gives_empty_pieces(ids: list[int]) -> None:
    assert token_pieces(build_char_tokenizer(), ids) == [""] * len(ids)
