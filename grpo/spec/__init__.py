"""JobSpec: the one description of a GRPO job.

The API validates request bodies with it, the store keeps it as JSON on the run, the
worker rebuilds the trainer from it and the CLI reads YAML into it. Pydantic only: this
module must import without torch. Knob names follow TRL's GRPOConfig where the concept is
the same. Its fields are grouped by concept in the modules beside it that it composes
(task, algorithm, generation, optimization; the data, resources, logging, eval and reward
sections); this module adds where the job runs and the rules that cross groups. Knows
nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from grpo.spec.algorithm import AlgorithmKnobs
from grpo.spec.asynchrony import AsyncKnobs, async_refusal
from grpo.spec.config import SpecInt
from grpo.spec.correction import CorrectionKnobs
from grpo.spec.data import DataSpec
from grpo.spec.endpoints import endpoint_host, is_allowed_host
from grpo.spec.eval import EvalSpec
from grpo.spec.generation import GenerationKnobs
from grpo.spec.legacy import map_legacy_fields
from grpo.spec.logging import LoggingSpec
from grpo.spec.optimization import OptimizationKnobs
from grpo.spec.resources import ResourcesSpec
from grpo.spec.rewards import (
    DEFAULT_FORMAT_PATTERN,
    ENTRY_POINT_GROUP,
    AccuracyReward,
    CodeReward,
    ExactMatchReward,
    FormatReward,
    HttpReward,
    LengthReward,
    ModelReward,
    PythonReward,
    RegexReward,
)
from grpo.spec.sources import parse_data_source
from grpo.spec.task import FIRST_USE_BUILD, RANDOM_WEIGHTS, TaskKnobs, model_warnings
from grpo.spec.tools import ToolKnobs
from grpo.spec.vllm import VllmKnobs

# the reward entries live in grpo/spec/rewards.py, the URL rule in grpo/spec/endpoints.py;
# they are also this module's names
__all__ = [
    "DEFAULT_FORMAT_PATTERN",
    "ENTRY_POINT_GROUP",
    "endpoint_host",
    "is_allowed_host",
    "AccuracyReward",
    "CodeReward",
    "ExactMatchReward",
    "FormatReward",
    "HttpReward",
    "LengthReward",
    "ModelReward",
    "PythonReward",
    "RegexReward",
    "JobSpec",
    "FIRST_USE_BUILD",
    "RANDOM_WEIGHTS",
    "model_warnings",
]


# pydantic orders fields base by base from the right (the reverse of Python's MRO): task,
# algorithm, generation, optimization, vllm, importance correction, tools, async, then this
# class's own; the validators below read fields of earlier bases in `info.data`.
class JobSpec(
    AsyncKnobs,
    ToolKnobs,
    CorrectionKnobs,
    VllmKnobs,
    OptimizationKnobs,
    GenerationKnobs,
    AlgorithmKnobs,
    TaskKnobs,
):
    """A GRPO training job: model, data, rewards and every algorithm knob."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"name": "arith-demo", "model": "builtin:tiny-arith", "max_steps": 30},
                {
                    "name": "r1-format",
                    "model": "Qwen/Qwen2.5-0.5B-Instruct",
                    "data": {"source": "dataset:0123456789abcdef"},
                    "rewards": [{"name": "accuracy"}, {"name": "format", "weight": 0.2}],
                    "num_generations": 16,
                    "max_completion_length": 512,
                    "beta": 0.0,
                    "loss_type": "dr_grpo",
                    "scale_rewards": "none",
                    "epsilon_high": 0.28,
                    "precision": "bf16",
                    "lora": {"r": 16},
                    "resources": {"queue": "h100"},
                },
            ]
        },
    )
    seed: SpecInt = Field(0, ge=0, le=2**32 - 1)
    """Seeds data order, sampling and initialisation."""
    save_steps: SpecInt = Field(10, ge=0, le=10**9)
    """Checkpoint every k steps (and at the end, see save_final); 0: only at the end."""
    save_final: bool = True
    """Checkpoint the model a completed run ends with, on the save_steps grid or not, and
    keep it out of the rotation (the latest grpo/checkpoints/files.py KEEP_CHECKPOINTS are kept):
    a run resumed later with a larger max_steps (`grpo train --resume`) rotates its new
    checkpoints past it, and the model the run first ended with stays downloadable.
    False: only save_steps' checkpoints, in the rotation; with save_steps 0, none at all
    (TRL's save_strategy="no"): a sweep that needs only metrics writes no weights. A run
    stopped early saves where it stopped either way (its resume point). HF Trainer saves
    at the end unless save_strategy is "no"; its save_total_limit spares only the best."""
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d{1,2})?)$")
    """`auto` picks CUDA when present, else CPU."""
    resources: ResourcesSpec = ResourcesSpec()
    """Queue routing."""
    logging: LoggingSpec = LoggingSpec()
    """What is kept of each step."""
    eval: EvalSpec | None = None
    """Held-out evaluation during training; None: none."""

    @model_validator(mode="before")
    @classmethod
    def _map_legacy(cls, data: object) -> object:
        return map_legacy_fields(data)

    @field_validator("generation_batch_size")
    @classmethod
    def _whole_groups(cls, value: int | None, info: ValidationInfo) -> int | None:
        g = info.data.get("num_generations")
        if value is not None and g is not None and value % g:
            raise ValueError(f"must be a multiple of num_generations ({g}): groups decode whole")
        return value

    @field_validator("resources")
    @classmethod
    def _ranks_fit(cls, value: ResourcesSpec, info: ValidationInfo) -> ResourcesSpec:
        ranks, prompts = value.num_processes * value.num_nodes, info.data.get("prompts_per_step")
        if prompts is not None and ranks > prompts:
            of = "" if value.num_nodes == 1 else f" x num_nodes ({value.num_nodes})"
            raise ValueError(
                f"num_processes ({value.num_processes}){of} must be at most prompts_per_step "
                f"({prompts}): whole groups are dealt to ranks"
            )
        if value.sharding == "fsdp" and info.data.get("lora") is not None:
            raise ValueError(
                "sharding fsdp is for full fine-tuning: with lora only the adapters train, "
                "so the frozen base fits where ddp does; use sharding ddp"
            )
        return value

    @field_validator("eval")
    @classmethod
    def _eval_held_out(cls, value: EvalSpec | None, info: ValidationInfo) -> EvalSpec | None:
        data = info.data.get("data")
        if value is None or data is None or value.source or value.holdout_fraction:
            return value
        kind = parse_data_source(data.source).kind
        if kind in ("dataset", "local"):
            what = "an uploaded dataset" if kind == "dataset" else "a local file"
            raise ValueError(
                f"data.source is {what}, which has one split: eval would score the prompts "
                "the run trains on. Set eval.source to a held-out dataset, or "
                "eval.holdout_fraction (e.g. 0.1) to keep a seeded share of this one out of "
                "training"
            )
        return value

    @model_validator(mode="after")
    def _algorithm_consistent(self) -> JobSpec:
        if self.eval is not None and self.resources.sharding == "fsdp":
            raise ValueError(
                "eval with resources.sharding fsdp is not supported yet: held-out evaluation "
                "runs on rank 0 alone and a sharded model needs every rank to gather it"
            )
        _check_vllm(self)
        if (refused := async_refusal(self)) is not None:
            raise ValueError(f"{refused[0]}: {refused[1]}")  # hints.py puts it at the field
        if self.sync_ref_model and self.lora is not None and self.ref_model_mixup_alpha != 1:
            raise ValueError(
                "with lora, ref_model_mixup_alpha must be 1: a mix of two LoRA factor pairs "
                "is not the mix of their weight updates"
            )
        return self

    @property
    def notes(self) -> list[str]:
        """Legal but questionable combinations, logged at the start of a run."""
        notes = []
        if self.importance_sampling_level == "sequence" and self.loss_type != "grpo":
            notes.append(
                f"importance_sampling_level sequence with loss_type {self.loss_type} sums "
                "per-token terms, weighting each sequence by its length; GSPO intends grpo"
            )
        if self.sync_ref_model and self.beta == 0:
            notes.append("sync_ref_model has no effect with beta 0 (no reference is kept)")
        if self.weight_sync_steps > 1 and not self.use_vllm and not self.async_generation:
            notes.append(
                "weight_sync_steps has no effect here: the native engine samples with the "
                "policy itself (it applies to vLLM and to async_generation)"
            )
        if self.tools and self.eval is not None:
            notes.append(
                "held-out evaluation samples single-turn completions: the tools are not "
                "offered to the model there (multi-turn eval is not built yet)"
            )
        return notes

    @property
    def eval_data(self) -> DataSpec:
        """The data section that loads the eval examples: the run's, with eval's fields."""
        ev = self.eval or EvalSpec()
        changes = {"source": ev.source, "prompt_field": ev.prompt_field,
                   "answer_field": ev.answer_field}  # fmt: skip
        return self.data.model_copy(
            update={"split": ev.split, **{k: v for k, v in changes.items() if v is not None}}
        )

    @property
    def completions_per_step(self) -> int:
        """B x G completions sampled each step."""
        return self.prompts_per_step * self.num_generations

    @property
    def display_name(self) -> str:
        """Name shown in lists."""
        return self.name or f"{self.model} on {self.data.source}"


def _check_vllm(spec: JobSpec) -> None:
    """Combinations use_vllm does not support (yet), refused before the run is queued."""
    if not spec.use_vllm:
        return
    if spec.vllm_enable_sleep_mode and spec.device == "cpu":
        raise ValueError("vllm_enable_sleep_mode is CUDA only: vLLM has no sleep mode on CPU")
    if spec.resources.sharding == "fsdp":
        raise ValueError(
            "use_vllm with resources.sharding fsdp is not supported yet: the engine takes "
            "whole weights on every rank; use sharding ddp"
        )
    many = "num_processes" if spec.resources.num_processes > 1 else "num_nodes"
    if spec.vllm_mode == "server" and getattr(spec.resources, many) > 1:
        raise ValueError(
            f"vllm_mode server with resources.{many} > 1 is not supported yet: one "
            "trainer process pushes its weights to the server; use vllm_mode colocate"
        )
    length = spec.vllm_max_model_length
    if length is not None and length < spec.max_prompt_length + spec.max_completion_length:
        raise ValueError(
            f"vllm_max_model_length ({length}) must hold max_prompt_length + "
            f"max_completion_length ({spec.max_prompt_length + spec.max_completion_length})"
        )
