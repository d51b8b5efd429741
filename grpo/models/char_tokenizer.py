"""The character-level tokenizer of the built-in model.

One token per character over printable ASCII and newline, plus <pad>, <s>, </s> and <unk>.
It is a real `PreTrainedTokenizerFast`: it saves to a directory and reloads with
`AutoTokenizer.from_pretrained`, exactly like a hub tokenizer. Left padding by default
because generation is batched with left padding. No chat template. Knows nothing of models
or training.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
CHARACTERS = "\n" + "".join(chr(c) for c in range(32, 127))
"""Newline and printable ASCII (space .. tilde); anything else becomes <unk>."""


def char_vocab() -> dict[str, int]:
    """Token → id: special tokens first (pad = 0), then the characters in code-point order."""
    return {token: i for i, token in enumerate((*SPECIAL_TOKENS, *CHARACTERS))}


def build_char_tokenizer() -> PreTrainedTokenizerFast:
    """A fresh character tokenizer that prepends <s> to every encoded text."""
    vocab = char_vocab()
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # Every character, whitespace included, is its own "word"; Fuse joins them back
    # without the spaces WordLevel decoding would otherwise insert.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        model_max_length=4096,
    )
