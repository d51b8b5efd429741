"""Response bodies of the API (request bodies are grpo.spec.JobSpec)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.store.models import GroupOutcome, RunStatus


class DoctorMark(BaseModel):
    """The run doctor's open findings at warning or above (GET /api/runs/{id}/diagnostics)."""

    open: int
    severity: Literal["warning", "critical"]
    """The worst of them."""


class TraceFrame(BaseModel):
    """One frame of a failure's traceback."""

    file: str
    """The source file's path (its end, when long)."""
    line: int
    function: str
    code: str
    """The source line, stripped; empty when the worker could not read it."""


class FailureCause(BaseModel):
    """The exception a failed run's `error` comes from (grpo/cause.py): the innermost of its
    chain (what a reward function raised, not the wrapper naming the step), with secrets
    scrubbed (URL passwords, bearer tokens, the values of the worker's secret variables)."""

    type: str
    """Its class, as Python's traceback names it: `ValueError`, `torch.OutOfMemoryError`."""
    message: str
    """Its message, at most 1,000 characters."""
    frames: list[TraceFrame]
    """The last frames of its traceback, innermost last (at most 10): our code's and the
    user's, e.g. the reward plugin's line that raised."""
    omitted_frames: int
    """Outer frames left out (a deep recursion's)."""


class RunOut(BaseModel):
    id: str
    name: str
    status: RunStatus
    spec: dict[str, Any]
    package_version: str
    submitted_by: str | None = None
    """The name of the token that submitted it; null on an open service (no tokens) and for
    runs from before owners. Cancel, resume, delete and weight downloads are for this owner
    or an admin."""
    step: int
    total_steps: int
    last_metrics: dict[str, float] | None
    error: str | None
    """Why the run failed, in one line worded for its user (or why it was requeued)."""
    cause: FailureCause | None = None
    """What a failed run's `error` comes from, with the last frames of its traceback; null
    when there is none (the run did not fail, its process was killed by a signal, or it
    failed before this was recorded). The run's log has it as a traceback too."""
    worker: str | None
    device: str | None
    attempts: int
    is_cancel_requested: bool
    waiting_for: str | None = None
    """What a queued run waits for, in one line: its gang's missing nodes ("1 of 2 nodes
    claimed: waiting for 1 more worker holding 1 device"), or why a worker left it queued
    ("worker w1 left this run queued: ..."); null when nothing is said, and once the run
    is claimed or ends."""
    created_at: str
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    doctor: DoctorMark | None = None
    """Open findings at warning or above, in GET /api/runs and GET /api/runs/{id}; null
    when none is open (and in the bodies of the run actions, which do not read them)."""


class RunList(BaseModel):
    items: list[RunOut]
    next_cursor: str | None


class MetricRow(BaseModel):
    step: int
    metrics: dict[str, float]


class Thinning(BaseModel):
    """How a thinned metrics answer was cut (app/store/thinning.py): of the `steps` stored
    steps in the range it keeps the first and the last, every row of a sparse metric, and in
    each of `buckets` runs of `bucket_steps` consecutive steps (the last may be shorter) the
    row where each other metric is lowest and the one where it is highest. Every row is a
    stored step as written: values are never averaged."""

    steps: int
    buckets: int
    bucket_steps: int


class MetricList(BaseModel):
    last_event_id: int
    """Newest event id when the rows were read: open the stream with it to continue live."""
    items: list[MetricRow]
    next_after_step: int | None = None
    """With `limit`: more steps follow; ask again with this as `after_step`. Null: the last
    page."""
    thinned: Thinning | None = None
    """Null: every step of the range is here. Else a thinned view of more steps, and how."""


class HistogramRow(BaseModel):
    step: int
    advantage_histogram: list[int]
    reward_histogram: list[int]
    group_reward_std_histogram: list[int]
    """Every group of the step counted by its reward std ([] for steps stored before it)."""


class HistogramList(BaseModel):
    last_event_id: int
    bin_edges: dict[str, list[float]]
    """Each histogram's fixed bin edges, by its name: counts[i] is [edges[i], edges[i+1])."""
    items: list[HistogramRow]


class LogRow(BaseModel):
    level: str
    message: str
    created_at: str


class LogList(BaseModel):
    items: list[LogRow]


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: bool
    broker: bool
    version: str


class Preset(BaseModel):
    name: str
    title: str
    description: str
    spec: dict[str, Any]


class PresetList(BaseModel):
    items: list[Preset]


class TrlConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: str = Field(min_length=1, max_length=200_000)
    """A TRL GRPOConfig as YAML, with the recipe's script arguments if any."""
    processes: int = Field(1, ge=1, le=4096)
    """Devices the recipe ran on (accelerate's num_processes)."""
    config_class: Literal["GRPOConfig", "AsyncGRPOConfig"] | None = None
    """The TRL class the recipe configures: `AsyncGRPOConfig` (TRL's AsyncGRPOTrainer) maps
    onto `async_generation: true` on a vLLM server (grpo/spec/trl_async.py), as `grpo convert
    --async` does; None: AsyncGRPOConfig when the config sets a field only that class has."""


class TrlConversionOut(BaseModel):
    spec: dict[str, Any]
    """The JobSpec, as POST /api/runs takes it."""
    unmapped: dict[str, str]
    """Each input field that has no equivalent, with the reason."""
    yaml: str
    """The spec as YAML, the unmapped fields listed in a comment at its top."""


class GroupSummary(BaseModel):
    step: int
    index: int
    prompt_id: str
    prompt: str
    answer: str
    rewards: list[float]
    advantages: list[float]
    reward_mean: float
    reward_std: float
    outcome: GroupOutcome
    has_truncated: bool
    has_completions: bool
    is_dropped: bool
    """Left out of training by dynamic sampling (no signal)."""


class GroupList(BaseModel):
    items: list[GroupSummary]


class CompletionOut(BaseModel):
    text: str
    num_tokens: int
    is_truncated: bool
    rewards: dict[str, float | None]
    reward: float
    advantage: float
    kl: float
    token_kls: list[float] | None
    tokens: list[str] | None = None
    """The text each token adds, aligned with token_kls; joined they are `text`."""
    finish_reason: Literal["eos", "stop", "length"] | None = None
    """Why sampling stopped: an end-of-sequence token, a stop string, or the length limit
    (null for samples stored before it was recorded)."""
    stop: str | None = None
    """The end-of-sequence token as text (e.g. `<|im_end|>`) or the stop string."""
    stop_token_id: int | None = None
    """The end-of-sequence id that ended it."""
    note: str | None = None
    """What a reward function noted about it (`code: killed at the CPU limit (5 s)`)."""
    extras: dict[str, str | int | float | bool | None] | None = None
    """Columns reward functions logged for it (TRL's `log_extra`), by column name."""
    trajectory: dict[str, Any] | None = None
    """A tool trajectory's turns: {reset, turns: [{text, num_model_tokens,
    num_context_tokens, context, calls: [{name, arguments, error}], results: [{name,
    content, is_error}]}], is_at_iteration_limit}; null for single-turn completions."""
    model_mask: list[int] | None = None
    """Per token (aligned with `tokens`): 1 sampled by the model, 0 a tool-result token in
    its context (never trained on); null for single-turn completions."""
    policy_version: int | None = None
    """The policy version (optimizer updates) of the weights that sampled it: step s trains
    at version s - 1, so it was s - 1 - policy_version versions stale (async_generation);
    null for samples stored before it was recorded."""
    sampler_logps: list[float] | None = None
    """Per token (aligned with `tokens`): the log-probability the sampler gave the token it
    sampled, where its engine reports one (vLLM, the asynchronous producer); null where it
    does not, where the tokens are not kept, or for samples stored before it was recorded."""


class GroupDetail(GroupSummary):
    completions: list[CompletionOut]
    """Sorted by reward, best first (empty when the logging policy kept no texts)."""


class ServingOut(BaseModel):
    """The vLLM server a generation worker runs for a run."""

    run_id: str
    model: str
    url: str
    """Where it answers: the run's trainer generates there (its vllm_server_base_url)."""


class WorkerOut(BaseModel):
    name: str
    queues: list[str]
    device: str
    """The device its runs' rank 0 trains on (`cuda:0 (NVIDIA H100 ...)`, `cpu`)."""
    device_kind: Literal["cuda", "cpu"]
    """What `devices` are: GPUs, or CPU slots on a machine without CUDA."""
    devices: list[str]
    """The GPUs it holds (as CUDA_VISIBLE_DEVICES names them) or its CPU slots (`0`..`n-1`);
    it takes runs whose `resources.num_processes` is at most their number (`grpo worker
    --devices`)."""
    engines: list[str] = ["native"]
    """Generation engines it can run: `native` (our decode loop) always, `vllm` when vLLM is
    installed on it; a run with use_vllm waits for a worker listing `vllm`."""
    free_memory_mb: int | None
    threads: int | None
    """torch's intra-op threads its runs train with: its CPU slots on a CPU worker, a few on a
    GPU worker, or OMP_NUM_THREADS where the user set it; null for a worker of an older
    version."""
    omp_wait_policy: str | None
    """OMP_WAIT_POLICY of the worker's process: PASSIVE (waiting threads sleep) unless the
    user set it."""
    run_id: str | None
    """The run it trains; for a generation worker, the run whose vLLM server it runs."""
    role: Literal["training", "generation"] = "training"
    """`generation`: a `grpo worker --generation`, which starts and owns the vLLM server of
    `vllm_mode: server` runs submitted with no server address."""
    serving: ServingOut | None = None
    """A generation worker's server while it runs one."""
    address: str | None = None
    """Its GRPO_WORKER_ADDRESS, where other machines reach it: a worker with one can take a
    node of a run on several machines (`resources.num_nodes` > 1); null: it takes none."""
    started_at: str
    last_seen_at: str


class WorkerList(BaseModel):
    items: list[WorkerOut]


class DatasetOut(BaseModel):
    id: str
    name: str
    num_records: int
    num_bytes: int
    fields: list[str]
    """Its records' field names; GET /api/datasets lists the first 32 (see num_fields)."""
    num_fields: int
    """How many fields its records have, named in `fields` or not."""
    created_at: str
    source: str
    """What a spec's data.source names to use it."""


class DatasetList(BaseModel):
    items: list[DatasetOut]


class CheckpointOut(BaseModel):
    step: int
    created_at: datetime
    num_bytes: int
    """Size of the checkpoint on disk (weights, tokenizer and trainer state)."""
    is_final: bool
    """Written when the run reached max_steps: the model it ends with."""
    download_url: str
    """The model directory as .tar.gz."""


class CheckpointList(BaseModel):
    items: list[CheckpointOut]


class EvalExample(BaseModel):
    prompt_id: str
    prompt: str
    """As the policy saw it (template applied)."""
    answer: str
    completions: list[str]
    rewards: dict[str, list[float | None]]
    """Per reward label, one score per completion (None: the function did not apply)."""
    passes: list[bool]


class EvalRow(BaseModel):
    step: int
    """Steps trained before the evaluation: 0 is the model as loaded."""
    metrics: dict[str, float]
    """`eval/accuracy`, `eval/reward`, `eval/<label>/mean`, `eval/pass@k` (k > 1)."""
    examples: list[EvalExample] | None = None


class EvalList(BaseModel):
    items: list[EvalRow]


class EvalPoint(BaseModel):
    step: int
    metrics: dict[str, float]


class RunSummary(BaseModel):
    """What a user pastes into a report (GET /api/runs/{id}/summary)."""

    status: str
    steps: int
    """Steps recorded (trained: step 0's evaluation before training is not one)."""
    first_eval: EvalPoint | None
    """The first held-out evaluation: step 0's, the untrained model, when the run started
    from scratch with an `eval` section."""
    final_eval: EvalPoint | None
    """The last held-out evaluation (spec `eval`), if any."""
    best_eval: EvalPoint | None
    """The evaluation with the highest eval/accuracy (the earliest of ties)."""
    reward_first_decile: float | None
    """Mean training reward over the first tenth of the steps (at least one step)."""
    reward_last_decile: float | None
    """Mean training reward over the last tenth of the steps."""
    kl_end: float | None
    """KL to the reference at the last step."""
    no_signal_share: float | None
    """Mean over steps of frac_reward_zero_std: groups whose rewards were all equal."""
    tokens_generated: int
    """Completion tokens of the trained batches (tokens_per_second x time/step, summed and
    rounded: a count); groups that dynamic sampling dropped are not counted."""
    seconds_per_phase: dict[str, float]
    """time/<phase> summed over the steps (generate, reward, reference, train, step...)."""
    checkpoint: CheckpointOut | None
    """The one to download: the final checkpoint, else the latest."""
