"""The GRPO trainer: one step = rollout -> rewards -> advantages -> loss -> update -> report.

Orchestration only; every formula lives in its own module (algo/advantages.py, algo/loss.py,
rewards/, report/metrics.py, algo/kl_control.py). Reports each step as a plain StepReport through a
callback and checkpoints to `workdir/checkpoints/`. Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from grpo.algo.kl_control import adapt_beta
from grpo.algo.loss import k3_kl
from grpo.checkpoints.training_state import (
    CheckpointContext,
    resume_training,
    save_training,
    start_fresh,
)
from grpo.data.example import Example
from grpo.data.holdout import holdout_split
from grpo.data.loading import load_nonempty
from grpo.data.prompts import check_prompts_render, has_chat_template
from grpo.engines.context import EngineContext
from grpo.engines.engine import Engine
from grpo.engines.kind import EngineServerFacts
from grpo.engines.registry import build_engine, check_engine
from grpo.engines.tool_loop import build_tool_loop
from grpo.eval.heldout import evaluate, holdout_fraction, is_eval_step, load_eval_examples
from grpo.failures import RewardFunctionError, is_out_of_memory, out_of_memory
from grpo.models.loading import load_policy, pick_device
from grpo.models.precision import autocast, compute_dtype
from grpo.parallel.rank_parts import rank_part, step_scalars, whole_step
from grpo.parallel.ranks import Ranks, current_ranks
from grpo.parallel.sharding import shard_models
from grpo.report import EvalReport, GroupReport, SavedCheckpoint, StepReport
from grpo.report.build import GroupsShown, build_groups, build_step_report
from grpo.report.memory import memory_scalars, reset_peak_memory
from grpo.report.outcome import completion_passes, pass_label
from grpo.report.timing import StepClock
from grpo.rewards.batch import Scores
from grpo.rewards.registry import check_answers_present
from grpo.rollout.dynamic_sampling import Batch
from grpo.rollout.group_source import GroupSource
from grpo.rollout.policy import (
    PolicyView,
    count_parameters,
    eos_token_ids,
    prepare_policy,
    update_mode,
)
from grpo.rollout.rollout import Rollout
from grpo.rollout.rounds import Rounds
from grpo.rollout.source_choice import build_source
from grpo.rollout.stopping import StopStrings
from grpo.spec import JobSpec
from grpo.tools.kind import ToolRunFacts
from grpo.training.optim import build_optimizer, build_scheduler
from grpo.training.reach import RunReach
from grpo.training.reference import ReferencePolicy
from grpo.training.step_loss import UpdateInputs, loss_mask_of, start_counts
from grpo.training.update import policy_update

Log = Callable[[str, str], None]


@dataclass(frozen=True)
class FitResult:
    last_step: int
    is_stopped: bool


def _ranks_for(spec: JobSpec) -> Ranks:
    """This process's ranks, which must be as many as the spec's resources ask for."""
    ranks = current_ranks()
    nodes, per_node = spec.resources.num_nodes, spec.resources.num_processes
    if ranks.world_size != nodes * per_node:
        of = "" if nodes == 1 else f" on each of {nodes} nodes"
        raise ValueError(
            f"resources.num_processes is {per_node}{of} but this process is one of "
            f"{ranks.world_size} ranks: `grpo train` and the service's workers launch the ranks"
        )
    return ranks


class TrainingLoop:
    """Builds policy, reference, optimizer and data from a JobSpec; `fit` runs the steps.
    A run is wired to it from every door by grpo/run/run.py; `from grpo import Trainer` is
    the Python API's (grpo/python_api.py)."""

    def __init__(
        self,
        spec: JobSpec,
        *,
        workdir: Path,
        cache_dir: Path,
        log: Log | None = None,
        progress: bool = False,
        run_id: str = "",
        reach: RunReach = RunReach(),
    ) -> None:
        """`reach`: what the run may read and call beyond its spec (RunReach; by default
        only the spec's own sources, no host, a vLLM server on loopback)."""
        # before anything loads or connects
        check_engine(spec, EngineServerFacts(vllm_server_hosts=tuple(reach.vllm_server_hosts)))
        self.ranks = _ranks_for(spec)
        self.spec = spec
        self.run_id = run_id
        self.workdir = Path(workdir)
        self.log: Log = log or (lambda level, message: None)
        self.device = pick_device(spec.device)
        self.dtype = compute_dtype(spec.precision, self.device)
        torch.manual_seed(spec.seed)  # LoRA initialisation
        self._load_examples(reach)
        model, self.tokenizer = load_policy(
            spec.model,
            cache_dir=Path(cache_dir),
            device=self.device,
            progress=progress,
            roots=reach.model_roots,
            log=self.log,
        )
        self.model = prepare_policy(model, spec)
        self._build_rewarders(Path(cache_dir), reach)
        self.reference = ReferencePolicy(self.model) if spec.beta > 0 else None
        if self.ranks.is_distributed and spec.resources.sharding == "fsdp":
            shard_models(self.model, self.reference and self.reference.frozen)
        self.optimizer = build_optimizer(self.model.parameters(), spec)
        self.scheduler = build_scheduler(self.optimizer, spec)
        self.beta = spec.beta
        self.eos_token_ids = eos_token_ids(self.tokenizer, self.model)
        self.stop_strings = StopStrings(self.tokenizer, spec.stop) if spec.stop else None
        self.uses_chat_template = has_chat_template(spec.data, self.tokenizer)
        check_prompts_render(self.examples, spec.data, self.tokenizer)
        hosts = reach.reward_hosts if reach.tool_hosts is None else reach.tool_hosts
        self._start_engines(
            ToolRunFacts(run_id, tuple(hosts), tuple(reach.token_envs), tuple(reach.plugin_dirs))
        )
        self.view = self._policy_view()
        self.checkpoints = CheckpointContext(
            spec, self.workdir, self.model, self.tokenizer, self.device, self.optimizer,
            self.scheduler, self.reference, self.ranks, self.log,
        )  # fmt: skip
        self.rounds = Rounds(self.view, self.examples, self.ranks)
        self.source: GroupSource = build_source(self.view, self.rounds, self.examples, self.ranks)
        for note in spec.notes:
            self.log("warning", note)
        self._log_loaded()

    def _load_examples(self, reach: RunReach) -> None:
        """The training examples (less the held-out share); the held-out ones load at the
        first evaluation."""
        spec = self.spec
        check_answers_present(spec)
        examples = load_nonempty(spec.data, reach.datasets_dir, reach.data_roots)
        self.examples = holdout_split(examples, holdout_fraction(spec), seed=spec.seed)[0]
        self.datasets_dir, self.data_roots = reach.datasets_dir, reach.data_roots
        self.eval_examples: list[Example] | None = None  # loaded at the first evaluation

    def _build_rewarders(self, cache_dir: Path, reach: RunReach) -> None:
        """The run's rewarder, and held-out evaluation's (the same unless spec.eval names
        its own rewards)."""
        rewarder = partial(reach.rewarder, cache_dir=cache_dir, device=self.device)
        self.rewarder = rewarder(self.spec.rewards)
        eval_rewards = self.spec.eval.rewards if self.spec.eval else None
        self.eval_rewarder = rewarder(eval_rewards) if eval_rewards else self.rewarder

    def _start_engines(self, tools: ToolRunFacts) -> None:
        """The run's engine, from a context of the policy's finished parts; with tools, the
        multi-turn loop around it (held-out evaluation keeps the single-turn engine)."""
        context = EngineContext(
            self.spec, self.model, self.tokenizer, self.device, self.dtype,
            self.eos_token_ids, self.stop_strings, self.log,
        )  # fmt: skip
        self.eval_engine: Engine = build_engine(context, self.workdir)
        self.engine: Engine = self.eval_engine
        self.tool_schemas: list[dict[str, Any]] | None = None
        if self.spec.tools:
            loop = build_tool_loop(
                self.engine, self.spec, self.tokenizer, self.eos_token_ids, tools
            )
            self.engine, self.tool_schemas = loop, loop.toolbox.schemas

    def _log_loaded(self) -> None:
        trainable, total = count_parameters(self.model)
        self.log(
            "info",
            f"model loaded: {self.spec.model} ({total / 1e6:.1f} M parameters, "
            f"{trainable / 1e6:.1f} M trainable) on {self.device}, "
            f"{'bf16' if self.dtype == torch.bfloat16 else 'fp32'} compute",
        )

    def _policy_view(self) -> PolicyView:
        """What the rounds, the source and held-out evaluation are given: every part they
        sample and score with, once all of them exist."""
        return PolicyView(
            spec=self.spec, run_id=self.run_id, model=self.model, tokenizer=self.tokenizer,
            device=self.device, dtype=self.dtype, rewarder=self.rewarder,
            eval_rewarder=self.eval_rewarder, eos_token_ids=self.eos_token_ids,
            stop_strings=self.stop_strings, uses_chat_template=self.uses_chat_template,
            log=self.log, engine=self.engine, eval_engine=self.eval_engine,
            tool_schemas=self.tool_schemas,
        )  # fmt: skip

    def fit(
        self,
        on_step: Callable[[StepReport], None],
        *,
        should_stop: Callable[[], bool] = lambda: False,
        resume: bool = True,
        fence: Callable[[], object] = lambda: None,
        on_checkpoint: Callable[[SavedCheckpoint], object] = lambda saved: None,
        on_eval: Callable[[EvalReport], object] = lambda report: None,
    ) -> FitResult:
        """Train up to spec.max_steps (1-based steps), checkpointing as the spec says.

        `fence` runs right before a checkpoint is renamed into place; it raises when this
        process may no longer write the run's files (another worker owns the run now).
        `on_checkpoint` hears of each checkpoint once it is in place; `on_eval` of each
        held-out evaluation (grpo/eval/heldout.py), whose scalars also join its step's.
        """
        try:
            return self._fit(on_step, should_stop, resume, fence, on_checkpoint, on_eval)
        finally:
            self.source.close()  # an async run's producer stops first: it uses the engine
            self.engine.close()  # vLLM's memory and processes; native has none

    def _fit(
        self,
        on_step: Callable[[StepReport], None],
        should_stop: Callable[[], bool],
        resume: bool,
        fence: Callable[[], object],
        on_checkpoint: Callable[[SavedCheckpoint], object],
        on_eval: Callable[[EvalReport], object],
    ) -> FitResult:
        resumed = resume_training(self.checkpoints) if resume else start_fresh(self.checkpoints)
        step = resumed.step
        if resumed.beta is not None:
            self.beta = resumed.beta
        self.source.start(step, self.model)  # resumed: the sampler takes the checkpoint's
        saved = step
        # held-out evaluation: rank 0 alone (it runs no collective; only rank 0 reports)
        if step == 0 and self.ranks.is_main and is_eval_step(self.spec, 0):
            on_eval(self._evaluate(0))
        while step < self.spec.max_steps and not self._any_rank(should_stop()):
            step += 1
            report = self._guarded_step(step)
            if report is not None:  # rank 0 (only it reports)
                on_step(self._with_eval(report, step, on_eval))
            if self.spec.save_steps and step % self.spec.save_steps == 0:
                saved = save_training(self.checkpoints, step, self.beta, fence, on_checkpoint)
        if step > saved and (self.spec.save_final or step < self.spec.max_steps):
            save_training(self.checkpoints, step, self.beta, fence, on_checkpoint)
        return FitResult(last_step=step, is_stopped=step < self.spec.max_steps)

    def _with_eval(
        self, report: StepReport, step: int, on_eval: Callable[[EvalReport], object]
    ) -> StepReport:
        """The report, with a held-out evaluation's scalars when one is due at `step`."""
        if not is_eval_step(self.spec, step):
            return report
        evaluated = self._evaluate(step)
        on_eval(evaluated)
        return replace(report, scalars={**report.scalars, **evaluated.scalars})

    def _any_rank(self, flag: bool) -> bool:
        """A stop any rank asked for (rank 0's cancel, a rank's Ctrl-C) stops them all
        between the same two steps."""
        return self.ranks.max([float(flag)])[0] > 0

    def step(self, step: int) -> StepReport | None:
        """One GRPO step on the prompts of 1-based `step`, in algorithm order; its report, on
        rank 0 (None on the other ranks of a distributed run: rank 0 reports the whole step)."""
        spec, clock = self.spec, StepClock()
        reset_peak_memory(self.device)
        pulled = self.source.take(step, clock)  # sampled now, or by the producer ahead
        filled, dynamic = pulled.filled, pulled.dynamic
        batch = filled.kept
        rollout, rewards, scores = batch.rollout, batch.rewards, batch.scores
        # again over the kept groups: a batch-level std must see the batch that trains
        advantages = self.rounds.compute_advantages(rewards, scores)
        loss_mask = loss_mask_of(rollout, spec)
        counts = start_counts(loss_mask, self.ranks)  # summed while the reference pass runs
        with clock.phase("reference"):
            ref_logps = self._reference_logps(rollout)
        with clock.phase("train"), update_mode(self.model, spec):
            update = policy_update(
                self.model,
                self.optimizer,
                rollout,
                UpdateInputs(
                    advantages.flatten().to(self.device), ref_logps, loss_mask, self.beta, counts
                ),
                spec=spec,
                step=step,
                ranks=self.ranks,
                autocast=lambda: autocast(self.device, self.dtype),
            )
        # the entropies the engine measured, or the update's forward pass's (vLLM)
        batch = replace(batch, rollout=replace(rollout, entropy=update.entropy))
        token_kls = k3_kl(update.logps, ref_logps) if ref_logps is not None else None
        passes = self._passes(batch.scores, batch.rewards)
        groups = self._report_groups(batch, advantages, token_kls, passes, first=filled.first)
        if filled.dropped is not None:
            dropped = filled.dropped
            dropped_passes = self._passes(dropped.scores, dropped.rewards)
            first = filled.first + len(groups)
            groups += self._report_groups(
                dropped, dropped.advantages, None, dropped_passes, first=first, is_dropped=True
            )
        part = rank_part(batch, groups, clock, passes, pulled.truncated_prompts)
        whole = whole_step(self.ranks, part)
        report = None
        if whole is not None:  # rank 0; beta and learning rate of this step, before they move
            learning_rate = float(self.scheduler.get_last_lr()[0])
            trained = step_scalars(
                whole, update.metrics, beta=self.beta, learning_rate=learning_rate
            )
            logged = pulled.logged_metrics  # log_metric of rank 0's functions
            scalars = {**trained, **dynamic, **logged, **pulled.scalars}
            scalars.update(memory_scalars(self.device))
            report = build_step_report(step, spec.max_steps, scalars, groups=whole.groups)
        self._after_update(step, kl=update.metrics.get("kl", 0.0))  # summed over ranks
        return report

    def _report_groups(
        self,
        batch: Batch,
        advantages: torch.Tensor,
        token_kls: torch.Tensor | None,
        passes: list[bool],
        first: int = 0,
        is_dropped: bool = False,
    ) -> list[GroupReport]:
        """The batch's GroupReports, indexed from `first` (this rank's first group, or the
        trained groups' count for the dropped ones); texts for the step's first
        max_groups_per_step trained groups, whatever rank has them; `passes`: each completion's
        pass or fail (_passes)."""
        keep = self.spec.logging.max_groups_per_step
        keep = keep if is_dropped else max(0, keep - first)
        shown = GroupsShown(self.tokenizer, self.eos_token_ids, keep, self.spec.stop)
        return build_groups(
            batch, advantages, token_kls, passes, shown, first_index=first, is_dropped=is_dropped
        )

    def _passes(self, scores: Scores, rewards: torch.Tensor) -> list[bool]:
        """Pass or fail of each completion (B x G, group-major) by grpo/report/outcome.py's rule."""
        return completion_passes(
            scores,
            rewards.flatten().tolist(),
            label=pass_label(self.spec.rewards),
            threshold=self.spec.logging.pass_threshold,
        )

    def _guarded_step(self, step: int) -> StepReport | None:
        try:
            return self.step(step)
        except RewardFunctionError as exc:
            placed = exc.located(step=step, prompt_id=None)  # Rounds.score located it
            if placed is exc:
                raise  # `raise exc from exc` would lose what the reward function raised
            raise placed from exc
        except (RuntimeError, MemoryError) as exc:
            if not is_out_of_memory(exc):
                raise
            raise out_of_memory(exc, self.spec, step=step, device=str(self.device)) from exc

    def _reference_logps(self, rollout: Rollout) -> torch.Tensor | None:
        if self.reference is None:
            return None
        with autocast(self.device, self.dtype):
            return self.reference.logps(
                self.model,
                rollout,
                temperature=self.spec.temperature,
                micro_batch_size=self.spec.micro_batch_size,
            )

    def _after_update(self, step: int, *, kl: float) -> None:
        """Hand the sampler the new weights when due (weight_sync_steps); advance the
        schedule, adapt beta, and sync the reference when due."""
        self.source.after_update(step, self.model)
        self.scheduler.step()
        self.beta = adapt_beta(
            self.beta, kl, target=self.spec.kl_target, horizon=self.spec.kl_horizon
        )
        if (
            self.reference is not None
            and self.spec.sync_ref_model
            and step % self.spec.ref_model_sync_steps == 0
        ):
            self.reference.sync(self.model, self.spec.ref_model_mixup_alpha)

    def _evaluate(self, step: int) -> EvalReport:
        if self.eval_examples is None:
            self.eval_examples = load_eval_examples(
                self.spec, self.examples, datasets_dir=self.datasets_dir,
                roots=self.data_roots, log=self.log,
            )  # fmt: skip
        return evaluate(self.view, step, self.eval_examples)
