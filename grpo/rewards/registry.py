"""Every reward kind, found by the `name` of an entry (the discriminator of
grpo/spec/rewards.py's RewardSpec union): one line per kind (grpo/rewards/kind.py says what
a kind is). Imports without torch: the API checks entries with it, the worker scores them.
"""

from __future__ import annotations

from typing import Any

from grpo.rewards.code import CODE
from grpo.rewards.http import HTTP
from grpo.rewards.kind import RewardKind
from grpo.rewards.model import MODEL
from grpo.rewards.python import PYTHON
from grpo.rewards.rules import RULE_KINDS
from grpo.spec.rewards import RewardSpec

REWARD_KINDS: dict[str, RewardKind[Any]] = {
    kind.name: kind for kind in (*RULE_KINDS, PYTHON, HTTP, MODEL, CODE)
}


def kind_of(entry: RewardSpec) -> RewardKind[Any]:
    """The kind of a reward entry (every entry of a valid spec has one)."""
    return REWARD_KINDS[entry.name]
