"""Fixtures of the unit tests that run a tiny random model."""

import pytest

from grpo.models.char_tokenizer import build_char_tokenizer
from tests.unit.tiny_lm import tiny_llama


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_llama(tokenizer)
