"""The byte-level BPE tokenizer of `builtin:small`, trained here, offline, in seconds.

Built like Qwen2's: NFC normalisation, a split that keeps every digit its own piece (so
numbers are several tokens), byte-level BPE over the 256 byte symbols (any text encodes,
nothing is <unk>), ChatML special tokens at the end of the vocabulary, a ChatML chat
template that renders tools as Qwen2.5's does, and two ids that end a completion
(`<|im_end|>` and `<|endoftext|>`). It is trained with the `tokenizers` library on text
generated here from a fixed seed (a synthetic lexicon in Zipf-distributed sentences, the
R1 template, arithmetic and tagged answers), so every machine builds the same vocabulary
without a download. Knows nothing of models or training.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from grpo.data.arith_task import arith_problems
from grpo.data.prompts import R1_TEMPLATE

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
VOCAB_SIZE = 32_000
"""Learned tokens (bytes and merges) plus the three special tokens, which come last."""
CORPUS_SEED = 20260101
CORPUS_SENTENCES = 30_000
LEXICON_SIZE = 48_000

SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""The GPT-4-style split Qwen2 uses: contractions, words with one leading non-letter,
single digits, punctuation runs, newlines, spaces."""

_TOOLS_SYSTEM = (
    "{%- if tools %}{{ '<|im_start|>system\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\n\n' }}{% endif %}"
    "{{ '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}"
    "{%- for tool in tools %}{{ '\n' }}{{ tool | tojson }}{% endfor %}"
    "{{ '\n</tools>\n\nFor each function call, return a json object with function name and "
    'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": '
    '<function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n\' }}'
    "{%- endif %}"
)
_TOOL_CALLS = (
    "{%- for call in message['tool_calls'] %}"
    "{%- set call = call['function'] if call['function'] is defined else call %}"
    "{{ '\n<tool_call>\n{\"name\": \"' + call['name'] + '\", \"arguments\": ' }}"
    "{{ (call['arguments'] if call['arguments'] is string else call['arguments'] | tojson) }}"
    "{{ '}\n</tool_call>' }}"
    "{%- endfor %}"
)
_TOOL_RESPONSE = (
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}"
    "{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\n<tool_response>\n' + message['content'] + '\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}"
    "{{ '<|im_end|>\n' }}{% endif %}"
)
CHAT_TEMPLATE = (
    _TOOLS_SYSTEM + "{% for message in messages %}"
    "{%- if tools and loop.first and message['role'] == 'system' %}"
    "{%- elif message['role'] == 'tool' %}" + _TOOL_RESPONSE + ""
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] %}"
    "{{ '<|im_start|>assistant' }}{% if message['content'] %}{{ '\n' + message['content'] }}"
    "{% endif %}" + _TOOL_CALLS + "{{ '<|im_end|>\n' }}"
    "{%- else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML: each turn is `<|im_start|>role\\ncontent<|im_end|>\\n`; the generation prompt
opens the assistant's turn. With tools, as Qwen2.5's template (Hermes' convention): the
system turn lists them as JSON inside `<tools></tools>` (after the system message, if
any), an assistant message's `tool_calls` render as `<tool_call>` blocks, and tool results
as `<tool_response>` blocks of one user turn. A chat without tools or tool messages
renders exactly as plain ChatML."""

_ONSETS = ("", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t",
           "v", "w", "y", "z", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl",
           "pr", "qu", "sc", "sh", "sl", "sp", "st", "th", "tr", "wh")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "io", "oo", "ou", "y")
_CODAS = ("", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "ck", "rt", "x")
_ROLES = ("system", "user", "assistant")
_PUNCTUATION = (".", ".", ".", ",", "?", "!", ";", ":")
_FIXED_WORDS = (
    "the of and to a in is it you that he was for on are with as his they be at "
    "one have this from or had by word but what some we can out other were all "
    "there when up use your how said an each she which do their time if will way "
    "about many then them write would like so these her long make thing see him "
    "two has look more day could go come did number sound no most people my over "
    "know water than call first who may down side been now find answer question "
    "think reason assistant user system solve problem sum difference step"
).split()


def _lexicon(rng: random.Random) -> list[str]:
    """Common English words first (most frequent), then seeded pseudo-words of 1-3 syllables."""
    words = dict.fromkeys(_FIXED_WORDS)
    while len(words) < LEXICON_SIZE:
        syllables = rng.choice((1, 2, 2, 3, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        words.setdefault(word)
    return list(words)


def _sentence(rng: random.Random, lexicon: list[str], weights: list[float]) -> str:
    words = rng.choices(lexicon, cum_weights=weights, k=rng.randint(4, 16))
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 10_000)))
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(_PUNCTUATION)


def training_corpus() -> Iterator[str]:
    """The seeded text the tokenizer is trained on (the same on every machine)."""
    rng = random.Random(CORPUS_SEED)
    lexicon = _lexicon(rng)
    # Zipf-like: the word of rank r is drawn with weight 1 / (r + 10)
    cumulative, total = [], 0.0
    for rank in range(len(lexicon)):
        total += 1.0 / (rank + 10)
        cumulative.append(total)
    for i in range(CORPUS_SENTENCES):
        yield _sentence(rng, lexicon, cumulative)
        if i % 100 == 0:
            yield R1_TEMPLATE.replace("{prompt}", _sentence(rng, lexicon, cumulative))
        if i % 10 == 0:  # the role names as they follow <|im_start|> in ChatML
            turns = [f"{role}\n{_sentence(rng, lexicon, cumulative)}" for role in _ROLES]
            yield "\n".join(turns) + "\n"
    for a, op, b in arith_problems():
        answer = a + b if op == "+" else a - b
        yield f"<think> {a} {op} {b} = {answer} </think> <answer> {answer} </answer>\n"
    # every pseudo-word at least twice, so the rare end of the lexicon still earns merges
    for start in range(0, len(lexicon), 12):
        line = " ".join(lexicon[start : start + 12])
        yield f"{line}\n{line}\n"


def train_backend() -> Tokenizer:
    """The trained `tokenizers` backend: byte-level BPE with the three special tokens last."""
    backend = Tokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(training_corpus(), trainer=trainer)
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return backend


def build_bpe_tokenizer() -> PreTrainedTokenizerFast:
    """A fresh `builtin:small` tokenizer: no BOS, `<|endoftext|>` pads, `<|im_end|>` ends."""
    return PreTrainedTokenizerFast(
        tokenizer_object=train_backend(),
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        additional_special_tokens=[IM_START],
        chat_template=CHAT_TEMPLATE,
        model_max_length=4096,
    )
