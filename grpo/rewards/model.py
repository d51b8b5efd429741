"""`model` rewards: a sequence classifier (grpo/rewards/classifier.py) scores prompt +
completion, one float per completion, read from one of its outputs.

The classifier is loaded by `prepare`, on the worker: this module imports without torch,
so the API can check a model entry's local path against its model roots.
"""

from __future__ import annotations

from grpo.rewards.kind import Refusal, RewardKind, RunFacts, Scorer, ServerFacts
from grpo.spec.rewards import ModelReward
from grpo.spec.sources import parse_model_name


def check_model_source(entry: ModelReward, server: ServerFacts) -> Refusal | None:
    """As the policy's `model`: a local path must lie inside this server's model roots, a
    hub id must be one this machine can load."""
    source = parse_model_name(entry.model)
    problem = None
    if source.kind == "local":
        problem = server.local_model_problem(source.value)
    elif source.kind == "hub":
        problem = server.hub_model_problem(source.value)
    return None if problem is None else Refusal("model", problem)


def prepare_classifier(entry: ModelReward, run: RunFacts) -> Scorer:
    """Load the classifier once, on the run's device, inside the model roots."""
    from grpo.rewards.classifier import RewardModel  # torch: on the worker only

    model = RewardModel(entry, device=run.device, cache_dir=run.cache_dir, roots=run.model_roots)
    return lambda batch, notes: model.score(batch)


MODEL = RewardKind("model", check_model_source, prepare_classifier)
