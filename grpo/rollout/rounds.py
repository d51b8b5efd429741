"""This rank's groups of one step, round by round: a round's prompts (round 0: the main
stream's; dynamic sampling's extra rounds: a reserve stream's), fitted to the prompt
budget, sampled with one seeded stream per group, decoded and scored (the path held-out
evaluation shares: scored_groups.py), and their advantages (the estimators live in
algo/advantages.py, the draws in sampling.py). What a round holds depends only on (seed,
step, round), so neither the ranks nor the batching change it.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial

import torch

from grpo.algo.advantages import AdvantageKnobs, ScoredRewards, step_advantages
from grpo.data.example import Example
from grpo.data.loading import PromptSampler
from grpo.failures import RewardFunctionError
from grpo.parallel.ranks import Ranks
from grpo.report.timing import StepClock
from grpo.rewards.batch import Scores, TrainerState
from grpo.rewards.scoring import notes_summary
from grpo.rollout.dynamic_sampling import (
    Batch,
    Filled,
    dynamic_scalars,
    fill_with_signal,
    rank_share,
)
from grpo.rollout.policy import PolicyView
from grpo.rollout.rollout import Rollout
from grpo.rollout.sampling import group_seed
from grpo.rollout.scored_groups import GroupPass, group_request, sample_groups


class Rounds:
    """Samples the rounds of a step for one rank of `policy`'s run."""

    def __init__(self, policy: PolicyView, examples: list[Example], ranks: Ranks) -> None:
        self.policy, self.examples, self.ranks = policy, examples, ranks
        spec = policy.spec
        self.samplers = {
            0: PromptSampler(examples, batch_size=spec.prompts_per_step, seed=spec.seed)
        }
        self.truncated_prompts = 0
        """Prompts cut to max_prompt_length since the last reset (the step's, all rounds)."""
        self.logged_metrics: dict[str, float] = {}
        """What reward functions logged with log_metric this step (its last round's value)."""

    def sample(self, step: int, clock: StepClock) -> tuple[Filled, dict[str, float]]:
        """Round 0 alone, or rounds until the step has prompts_per_step groups with signal
        (decided on the whole rounds, every rank's groups); this rank's groups, and the
        dynamic_sampling/* scalars."""
        spec = self.policy.spec
        self.truncated_prompts = 0
        self.logged_metrics = {}
        if not spec.dynamic_sampling.enabled:
            first = self.ranks.groups(spec.prompts_per_step).start
            return Filled(self.sample_round(step, 0, clock), None, 1, first=first), {}
        filled = fill_with_signal(
            lambda round_index: self.sample_round(step, round_index, clock),
            target=spec.prompts_per_step,
            max_rounds=spec.dynamic_sampling.max_rounds,
            pad_token_id=self.policy.tokenizer.pad_token_id,
            ranks=self.ranks,
        )
        dynamic = dynamic_scalars(spec, step, filled, clock, log=self.policy.log)
        return rank_share(self.ranks, filled), dynamic

    def sample_round(self, step: int, round_index: int, clock: StepClock) -> Batch:
        """Prompts of `step` (round 0) or of a reserve stream (extra rounds), generated and
        scored (grpo/rollout/scored_groups.py); a round's prompts and samples depend only on
        (seed, step, round)."""
        examples = self.sampler_for(round_index).batch(step)
        mine = self.ranks.groups(len(examples))  # all of them on one process
        examples = examples[mine.start : mine.stop]
        how = self.round_pass(step, round_index)
        with clock.phase("dynamic_sampling") if round_index else nullcontext():
            try:
                groups = sample_groups(
                    self.policy, examples, how, step=step, first=mine.start, clock=clock
                )
            except RewardFunctionError as exc:
                g = how.num_generations
                prompt_id = None if exc.index is None else examples[exc.index // g].id
                placed = exc.located(step=step, prompt_id=prompt_id)
                if placed is exc:
                    raise  # `raise exc from exc` would lose what the reward function raised
                raise placed from exc
        scored = groups.outcome
        if scored.notes:
            self.policy.log("warning", notes_summary(scored.notes, groups.batch))
        self.truncated_prompts += sum(f.is_truncated for f in groups.fitted)
        for label, seconds in scored.seconds.items():  # time/reward/<label>, all rounds
            clock.seconds[f"reward/{label}"] = clock.seconds.get(f"reward/{label}", 0.0) + seconds
        advantages = self.compute_advantages(groups.rewards, scored.scores)
        self.logged_metrics.update(scored.metrics)
        return Batch(
            examples, groups.prompts, groups.rollout, groups.texts, scored.scores, groups.rewards,
            advantages, scored.notes, scored.extras,
        )  # fmt: skip

    def sampler_for(self, round_index: int) -> PromptSampler:
        """The prompt stream of a round (0: the main one; a reserve stream per extra round)."""
        if round_index not in self.samplers:
            self.samplers[round_index] = PromptSampler(
                self.examples,
                batch_size=self.policy.spec.prompts_per_step,
                seed=self.policy.spec.seed * 64 + round_index,  # never the main stream's seed
            )
        return self.samplers[round_index]

    def round_pass(self, step: int, round_index: int) -> GroupPass:
        """How round `round_index` of `step` samples and scores: the run's engine, rewards
        and sampling knobs, a stream per group seeded by (seed, step, round, position)."""
        policy, spec = self.policy, self.policy.spec
        return GroupPass(
            engine=policy.engine,
            rewarder=policy.rewarder,
            sampling=spec.sampling,
            num_generations=spec.num_generations,
            seed_of=partial(_round_seed, spec.seed, step, round_index),
            trainer_state=TrainerState.at_step(
                step,
                max_steps=spec.max_steps,
                prompts_per_step=spec.prompts_per_step,
                num_examples=len(self.examples),
            ),
            answer_field=spec.data.answer_field,
            tools=policy.tool_schemas,
        )

    def generate(self, prompts: list[str], step: int, round_index: int = 0) -> Rollout:
        """G completions of each prompt (rendered text), seeded as round `round_index` of
        `step` seeds them from the step's first group."""
        request = group_request(self.policy, prompts, self.round_pass(step, round_index))
        return self.policy.engine.generate(request)

    def compute_advantages(self, rewards: torch.Tensor, scores: Scores) -> torch.Tensor:
        """(B, G) advantages of the rewards (B, G): a batch-wide std is over every rank's."""
        scored = ScoredRewards(rewards, scores, self.policy.rewarder.weights)
        batch_std = self.ranks.population_std if self.ranks.is_distributed else None
        return step_advantages(scored, AdvantageKnobs.of(self.policy.spec), batch_std)


def _round_seed(seed: int, step: int, round_index: int, position: int) -> int:
    return group_seed(seed, step, position, round_index)
