"""This rank's groups of one step, round by round: a round's prompts (round 0: the main
stream's; dynamic sampling's extra rounds: a reserve stream's), fitted to the prompt
budget, sampled with one seeded stream per group, decoded, scored, and their group-relative
advantages (the formulas live in algo/advantages.py, the draws in sampling.py). What a round
holds depends only on (seed, step, round), so neither the ranks nor the batching change it.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

from grpo.algo.advantages import AdvantageKnobs, ScoredRewards, step_advantages
from grpo.data.example import Example
from grpo.data.loading import PromptSampler
from grpo.data.prompt_fit import FittedPrompt, fit_prompt
from grpo.engines.engine import GenerationRequest
from grpo.engines.tool_loop import ToolLoop
from grpo.failures import RewardFunctionError
from grpo.parallel.ranks import Ranks
from grpo.report.timing import StepClock
from grpo.rewards.batch import RewardBatch, Scores, TrainerState
from grpo.rewards.rules import total_rewards
from grpo.rewards.scoring import RewardOutcome, notes_summary
from grpo.rollout.dynamic_sampling import (
    Batch,
    Filled,
    dynamic_scalars,
    fill_with_signal,
    rank_share,
)
from grpo.rollout.policy import PolicyView
from grpo.rollout.rollout import Rollout, completion_token_ids, decode_completions, tokenize_prompts
from grpo.rollout.sampling import group_seed


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
        scored; a round's prompts and samples depend only on (seed, step, round)."""
        examples = self.sampler_for(round_index).batch(step)
        mine = self.ranks.groups(len(examples))  # all of them on one process
        examples = examples[mine.start : mine.stop]
        fitted = [self.fit_prompt(example) for example in examples]
        prompts = [f.text for f in fitted]
        self.truncated_prompts += sum(f.is_truncated for f in fitted)
        with clock.phase("dynamic_sampling") if round_index else nullcontext():
            with clock.phase("generate"):
                records = [{"prompt": e.prompt, "answer": e.answer, **e.data} for e in examples]
                rollout = self.generate(
                    prompts, step, round_index, first=mine.start, records=records
                )
            if isinstance(self.policy.engine, ToolLoop):  # time/tools: the calls' wall time
                clock.seconds["tools"] = (
                    clock.seconds.get("tools", 0.0) + self.policy.engine.take_tool_seconds()
                )
            with clock.phase("reward"):
                texts = decode_completions(self.policy.tokenizer, rollout)
                scored = self.score(step, examples, prompts, texts, rollout)
                scores = scored.scores
                rewards = torch.tensor(total_rewards(scores, self.policy.rewarder.weights))
                rewards = rewards.view(len(examples), -1)  # (B, G)
        for label, seconds in scored.seconds.items():  # time/reward/<label>, all rounds
            clock.seconds[f"reward/{label}"] = clock.seconds.get(f"reward/{label}", 0.0) + seconds
        advantages = self.compute_advantages(rewards, scores)
        self.logged_metrics.update(scored.metrics)
        return Batch(
            examples, prompts, rollout, texts, scores, rewards, advantages, scored.notes,
            scored.extras,
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

    def fit_prompt(self, example: Example) -> FittedPrompt:
        return fit_prompt(
            example,
            self.policy.spec.data,
            self.policy.tokenizer,
            max_length=self.policy.spec.max_prompt_length,
            add_special_tokens=not self.policy.uses_chat_template,
            tools=self.policy.tool_schemas,
        )

    def generate(
        self,
        prompts: list[str],
        step: int,
        round_index: int = 0,
        first: int = 0,
        records: list[dict[str, Any]] | None = None,
    ) -> Rollout:
        """G completions of each prompt; `first`: the position in the step of the first;
        `records`: the prompts' records, for a tool environment's reset."""
        policy, spec = self.policy, self.policy.spec
        ids, mask = tokenize_prompts(
            policy.tokenizer,
            prompts,
            max_length=spec.max_prompt_length,
            add_special_tokens=not policy.uses_chat_template,
            device=policy.device,
        )
        # a stream per group seeded by (seed, step, dynamic-sampling round, group position):
        # resuming at step k samples what the uninterrupted run sampled, whatever consumed
        # the global RNG before, and neither generation_batch_size nor the ranks change a
        # sample
        seeds = [group_seed(spec.seed, step, first + i, round_index) for i in range(len(prompts))]
        request = GenerationRequest(
            ids, mask, spec.num_generations, spec.max_completion_length, spec.sampling, seeds,
            records,
        )  # fmt: skip
        return policy.engine.generate(request)

    def score(
        self,
        step: int,
        examples: list[Example],
        prompts: list[str],
        texts: list[str],
        rollout: Rollout,
    ) -> RewardOutcome:
        spec = self.policy.spec
        batch = RewardBatch(
            run_id=self.policy.run_id,
            step=step,
            examples=examples,
            prompts=prompts,
            completions=texts,
            num_tokens=rollout.model_token_mask.sum(dim=1).tolist(),  # tool tokens left out
            completion_ids=completion_token_ids(rollout),
            trainer_state=TrainerState.at_step(
                step,
                max_steps=spec.max_steps,
                prompts_per_step=spec.prompts_per_step,
                num_examples=len(self.examples),
            ),
            answer_field=spec.data.answer_field,
            trajectories=rollout.trajectories,
        )
        try:
            scored = self.policy.rewarder.score(batch)
        except RewardFunctionError as exc:
            g = self.policy.spec.num_generations
            prompt_id = None if exc.index is None else examples[exc.index // g].id
            placed = exc.located(step=step, prompt_id=prompt_id)
            if placed is exc:
                raise  # `raise exc from exc` would lose what the reward function raised
            raise placed from exc
        if scored.notes:
            self.policy.log("warning", notes_summary(scored.notes, batch))
        return scored

    def compute_advantages(self, rewards: torch.Tensor, scores: Scores) -> torch.Tensor:
        """(B, G) advantages of the rewards (B, G): a batch-wide std is over every rank's."""
        scored = ScoredRewards(rewards, scores, self.policy.rewarder.weights)
        batch_std = self.ranks.population_std if self.ranks.is_distributed else None
        return step_advantages(scored, AdvantageKnobs.of(self.policy.spec), batch_std)
