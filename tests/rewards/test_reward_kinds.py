"""Reward kinds (grpo/rewards/registry.py, grpo/rewards/kind.py): every entry of the spec's
reward union has one kind, with its submit-time check, found by the entry's `name`; the
checks refuse what a server does not allow, naming the field."""

from __future__ import annotations

from typing import get_args

import pytest

from grpo.rewards.code import CODE
from grpo.rewards.http import HTTP
from grpo.rewards.kind import Refusal, ServerFacts
from grpo.rewards.model import MODEL
from grpo.rewards.python import PYTHON
from grpo.rewards.registry import REWARD_KINDS, kind_of
from grpo.rewards.sandbox import bubblewrap
from grpo.spec.rewards import (
    AccuracyReward,
    CodeReward,
    HttpReward,
    ModelReward,
    PythonReward,
    RegexReward,
    RewardSpec,
)


def _entry_names() -> list[str]:
    union = get_args(RewardSpec)[0]  # Annotated[A | B | ..., Field(discriminator="name")]
    return [entry.model_fields["name"].default for entry in get_args(union)]


def test_every_reward_entry_of_the_spec_has_a_kind_with_a_submit_time_check() -> None:
    names = _entry_names()
    assert len(names) == 11 and sorted(REWARD_KINDS) == sorted(names)
    for name in names:
        kind = REWARD_KINDS[name]
        assert kind.name == name and callable(kind.check) and callable(kind.prepare)


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        (HttpReward(url="http://judge.internal/score"), HTTP),
        (PythonReward(function="contains_answer"), PYTHON),
        (ModelReward(model="hf-internal/rm"), MODEL),
        (CodeReward(), CODE),
    ],
)
def test_a_kind_is_found_by_its_entry_name(entry, kind) -> None:
    assert kind_of(entry) is kind


SERVER = ServerFacts(reward_hosts=("judge.internal",), token_envs=())


@pytest.mark.parametrize(
    ("entry", "refusal"),
    [
        (HttpReward(url="http://judge.internal:8000/score"), None),
        (
            HttpReward(url="http://evil.example/score"),
            Refusal(
                "url",
                "host 'evil.example' is not an allowed reward host; allowed: judge.internal",
            ),
        ),
        (PythonReward(function="contains_answer"), None),  # the example plugin, installed
        (AccuracyReward(), None),
        (RegexReward(pattern="x"), None),
        (ModelReward(model="hf-internal/rm"), None),  # a hub id is no local path
        (
            ModelReward(model="/models/rm"),
            Refusal("model", "local model paths are not allowed here"),
        ),
    ],
)
def test_a_kinds_check_refuses_what_the_server_does_not_allow_naming_the_field(
    entry, refusal
) -> None:
    assert kind_of(entry).check(entry, SERVER) == refusal


def test_a_python_reward_must_be_installed_on_the_server() -> None:
    refusal = kind_of(PythonReward(function="nope")).check(PythonReward(function="nope"), SERVER)
    assert refusal is not None and refusal.field == "function"
    assert refusal.message.startswith("no reward function 'nope' is installed")


def test_a_code_reward_needs_bubblewrap_on_the_server() -> None:
    refusal = CODE.check(CodeReward(), SERVER)
    assert (refusal is None) == (bubblewrap() is not None)
