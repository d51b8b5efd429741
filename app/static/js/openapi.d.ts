// Generated from the OpenAPI document by `python -m app.api.jstypes`; do not edit.
// The dashboard's JSDoc imports these: /** @typedef {import('./openapi').RunOut} RunOut */

/** 1 when the completion's final answer equals the reference answer, else 0. */
export type AccuracyReward = {
  name?: "accuracy";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Where the answer is read: `auto` tries <answer>, then \boxed{}, then the last number. */
  extract?: "auto" | "answer_tag" | "boxed" | "last_number";
  /** How the extracted answer is compared to the reference. */
  compare?: "numeric" | "symbolic" | "string";
  /** Absolute tolerance for numeric comparison. */
  tolerance?: number;
};

export type ClonePatch = {
  patch?: { [key: string]: any };
};

/**
 * Fraction of the record's tests the completion's program passes, run in a bubblewrap
 * sandbox with CPU, memory, process, file-size and output limits.
 */
export type CodeReward = {
  name?: "code";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Record field with the tests: a list of Python statements (asserts), or one string. */
  tests_field?: string;
  /** CPU and wall-clock seconds the program and all its tests may take. */
  timeout_s?: number;
  /** Address-space limit of the sandboxed process. */
  memory_mb?: number;
};

export type CompletionOut = {
  text: string;
  num_tokens: number;
  is_truncated: boolean;
  rewards: { [key: string]: number | null };
  reward: number;
  advantage: number;
  kl: number;
  token_kls: number[] | null;
  tokens?: string[] | null;
};

/** Where prompts and reference answers come from. */
export type DataSpec = {
  /**
   * `builtin:arith`, `builtin:code`, `dataset:<id>` (uploaded), `hf:<name>[:<config>]` or a
   * JSONL path (`file:<path>` or any other text); see grpo/sources.py.
   */
  source?: string;
  /** Split to train on. */
  split?: string;
  /** Field of each record that holds the prompt. */
  prompt_field?: string;
  /** Field of each record that holds the reference answer. */
  answer_field?: string;
  /** Text around each prompt; `{prompt}` is replaced by the record's prompt. */
  prompt_template?: string;
  /** Apply the tokenizer's chat template when it has one. */
  use_chat_template?: boolean;
};

export type DatasetList = {
  items: DatasetOut[];
};

export type DatasetOut = {
  id: string;
  name: string;
  num_records: number;
  num_bytes: number;
  fields: string[];
  created_at: string;
  source: string;
};

/**
 * DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476): drop groups whose rewards
 * are all equal (zero advantage, no gradient) and sample more prompts until the step has
 * prompts_per_step groups with signal or the rounds run out.
 */
export type DynamicSamplingSpec = {
  /** Drop zero-signal groups and refill the step with newly sampled prompts. */
  enabled?: boolean;
  /**
   * Generation rounds per step at most, the first included; then the step trains on what
   * it has.
   */
  max_rounds?: number;
};

/** 1 when the completion equals the reference answer (after optional strip), else 0. */
export type ExactMatchReward = {
  name?: "exact_match";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Strip surrounding whitespace from both sides before comparing. */
  strip?: boolean;
};

/** 1 when the whole completion matches `pattern`, else 0. */
export type FormatReward = {
  name?: "format";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Regular expression the completion must match (dot matches newlines). */
  pattern?: string;
};

export type GroupDetail = {
  step: number;
  index: number;
  prompt_id: string;
  prompt: string;
  answer: string;
  rewards: number[];
  advantages: number[];
  reward_mean: number;
  reward_std: number;
  outcome: GroupOutcome;
  has_truncated: boolean;
  has_completions: boolean;
  is_dropped: boolean;
  completions: CompletionOut[];
};

/**
 * One kind of a step's groups: an outcome, no reward spread, a completion cut short, or
 * the groups dynamic sampling left out (every other filter lists trained groups only).
 */
export type GroupFilter = "all_fail" | "all_pass" | "mixed" | "zero_std" | "truncated" | "dropped";

export type GroupList = {
  items: GroupSummary[];
};

/**
 * A group by its completions' total rewards: a completion passes when its reward is > 0
 * (for 0/1 rewards all-fail is all 0). The store, the API and the dashboard use these names;
 * metrics.group_scalars counts the same three over a step's reward tensor (groups/<outcome>).
 */
export type GroupOutcome = "all_fail" | "all_pass" | "mixed";

export type GroupSummary = {
  step: number;
  index: number;
  prompt_id: string;
  prompt: string;
  answer: string;
  rewards: number[];
  advantages: number[];
  reward_mean: number;
  reward_std: number;
  outcome: GroupOutcome;
  has_truncated: boolean;
  has_completions: boolean;
  is_dropped: boolean;
};

export type HTTPValidationError = {
  detail?: ValidationError[];
};

export type Health = {
  status: "ok" | "degraded";
  database: boolean;
  broker: boolean;
  version: string;
};

export type HistogramList = {
  last_event_id: number;
  bin_edges: { [key: string]: number[] };
  items: HistogramRow[];
};

export type HistogramRow = {
  step: number;
  advantage_histogram: number[];
  reward_histogram: number[];
  group_reward_std_histogram: number[];
};

/**
 * An endpoint that scores whole groups: POST {run_id, step, groups: [{index, prompt,
 * answer, data, completions}]} -> {rewards: [[float | null, ...], ...]} of the same shape.
 */
export type HttpReward = {
  name?: "http";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Endpoint URL; its host must be listed in the operator's GRPO_REWARD_HOSTS. */
  url: string;
  /** Seconds one request may take. */
  timeout_s?: number;
  /** Retries (with exponential backoff) after a connection error or a 5xx answer. */
  max_retries?: number;
  /** Name of a worker environment variable whose value is sent as a bearer token. */
  token_env?: string | null;
  /** Groups sent in one request; a step's requests run concurrently. */
  groups_per_request?: number;
  /** Requests in flight at once for this endpoint. */
  max_concurrency?: number;
};

/** A GRPO training job: model, data, rewards and every algorithm knob. */
export type JobSpec = {
  /** Human-readable run name. */
  name?: string | null;
  /**
   * `builtin:tiny`, `builtin:tiny-arith`, `builtin:small` (a 32k-BPE Qwen2, random), a
   * Hugging Face model id (`org/name` or `hf:org/name`) or a local directory (`/abs`,
   * `./rel`, `~/dir` or `file:<path>`).
   */
  model?: string;
  /** Prompt source. */
  data?: DataSpec;
  /**
   * Reward functions; a completion's total reward is the weighted sum of the ones that
   * apply to it (a function returns null where it does not).
   */
  rewards?: (AccuracyReward | FormatReward | LengthReward | ExactMatchReward | RegexReward | PythonReward | HttpReward | ModelReward | CodeReward)[];
  /** Number of GRPO steps (one generation batch each). */
  max_steps?: number;
  /** Prompts (groups) per step, B. */
  prompts_per_step?: number;
  /** Completions per prompt (G); advantages are relative within a group. */
  num_generations?: number;
  /** Updates per generation batch (mu); >1 clips against the sampling policy. */
  num_iterations?: number;
  /** KL coefficient toward the reference policy (0 skips the reference pass). */
  beta?: number;
  /** When set, beta adapts each step toward this KL (adaptive controller). */
  kl_target?: number | null;
  /** Steps over which the adaptive controller closes the gap to kl_target. */
  kl_horizon?: number;
  /**
   * Update the reference from the policy every ref_model_sync_steps steps (TR-DPO,
   * Gorbatovski et al. 2024, arXiv:2404.09656); replaces `sync_ref_every`.
   */
  sync_ref_model?: boolean;
  /** Steps between reference updates (TR-DPO's tau). */
  ref_model_sync_steps?: number;
  /** ref <- alpha * policy + (1 - alpha) * ref at each update; 1 copies the policy. */
  ref_model_mixup_alpha?: number;
  /** Lower clip range: ratio is clipped below at 1 - epsilon. */
  epsilon?: number;
  /** Upper clip range (DAPO clip-higher); None means epsilon. */
  epsilon_high?: number | null;
  /**
   * Two-sided clipping (INTELLECT-2, arXiv:2505.07291): the unclipped ratio is capped at
   * delta, bounding negative-advantage updates too; must exceed 1 + epsilon_high.
   */
  delta?: number | null;
  /**
   * How per-token losses are formed and averaged; see grpo/loss.py. `cispo` (MiniMax-M1)
   * weights log-probs by the importance ratio capped at epsilon_high (not 1 + epsilon_high).
   */
  loss_type?: "grpo" | "bnpo" | "dr_grpo" | "dapo" | "cispo";
  /**
   * One ratio per token, or one per sequence: exp of the mean log-ratio over its tokens
   * (GSPO, Zheng et al. 2025, arXiv:2507.18071).
   */
  importance_sampling_level?: "token" | "sequence";
  /**
   * Only the top-rho share of the step's tokens by entropy enter the policy loss (Beyond
   * the 80/20 Rule, arXiv:2506.01939, recommends 0.2); 1 keeps all.
   */
  top_entropy_quantile?: number;
  /** Entropy bonus: loss -= coef * mean token entropy of the tokens in the policy loss. */
  entropy_coef?: number;
  /**
   * Weighted sum of rewards, then advantages; or each function normalised within its group
   * first (GDPO, arXiv:2601.05242); see grpo/advantages.py.
   */
  multi_objective_aggregation?: "sum_then_normalize" | "normalize_then_sum";
  /** Drop all-equal-reward groups and sample more (DAPO). */
  dynamic_sampling?: DynamicSamplingSpec;
  /** Std that divides centred rewards: per group, whole batch, or none (Dr. GRPO). */
  scale_rewards?: "group" | "batch" | "none";
  /** Added to the std so all-equal groups get advantage 0. */
  advantage_eps?: number;
  /** When set, advantages are clipped to [-c, c]. */
  advantage_clip?: number | null;
  /** Exclude completions that hit max_completion_length from the loss. */
  mask_truncated_completions?: boolean;
  /**
   * Prompt tokens at most: a longer prompt loses the start of its content (the prompt
   * text or the last user turn), never its template or other turns (see prompt_fit.py);
   * the metric prompts/truncated counts them. TRL's name.
   */
  max_prompt_length?: number;
  /** Tokens generated at most per completion. */
  max_completion_length?: number;
  /** Sampling temperature. */
  temperature?: number;
  /** Nucleus sampling mass; 1 disables. */
  top_p?: number;
  /** Sample among the k most likely tokens; 0 disables. */
  top_k?: number;
  /**
   * Drop tokens less likely than min_p times the most likely one (Nguyen et al. 2024,
   * arXiv:2407.01082); None disables.
   */
  min_p?: number | null;
  /**
   * Logits of tokens already in the prompt or completion are divided by it (multiplied
   * when negative; CTRL, arXiv:1909.05858); 1 disables.
   */
  repetition_penalty?: number;
  /** Peak learning rate. */
  learning_rate?: number;
  /** Decay after warmup. */
  lr_scheduler_type?: "constant" | "linear" | "cosine";
  /** Linear warmup steps. */
  warmup_steps?: number;
  /** Decoupled weight decay. */
  weight_decay?: number;
  /** Gradient clipping by global norm; None disables. */
  max_grad_norm?: number | null;
  /** Optimizer. */
  optim?: "adamw_torch" | "adafactor";
  /**
   * Completions per forward/backward pass of the update and of the reference and old-policy
   * passes; gradients accumulate across them and the step equals the full batch's. A group
   * may be split. None: all B x G at once. Bounds activation memory (TRL: per-device batch
   * size with gradient accumulation).
   */
  micro_batch_size?: number | null;
  /**
   * Completions decoded at once, in whole groups: a multiple of num_generations. Bounds
   * the KV cache. None: all B x G at once. Samples do not depend on it.
   */
  generation_batch_size?: number | null;
  /** Recompute activations in backward to save memory. */
  gradient_checkpointing?: boolean;
  /** bf16 autocast where the hardware has it (auto), or forced. */
  precision?: "auto" | "fp32" | "bf16";
  /** Train LoRA adapters instead of the full model. */
  lora?: LoraSpec | null;
  /** Seeds data order, sampling and initialisation. */
  seed?: number;
  /** Checkpoint every k steps (and at the end); 0 only at the end. */
  save_steps?: number;
  /** `auto` picks CUDA when present, else CPU. */
  device?: string;
  /** Queue routing. */
  resources?: ResourcesSpec;
  /** What is kept of each step. */
  logging?: LoggingSpec;
};

/** Soft overlong penalty (DAPO): 0 up to max_length - cache_length, then linear to -1. */
export type LengthReward = {
  name?: "length";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Completion length in tokens at which the penalty reaches -1. */
  max_length?: number;
  /** Width in tokens of the linear penalty ramp before max_length. */
  cache_length?: number;
};

export type LogList = {
  items: LogRow[];
};

export type LogRow = {
  level: string;
  message: string;
  created_at: string;
};

/** What is kept of each step beyond its scalars. */
export type LoggingSpec = {
  /** Groups per step whose completion texts are kept (all group stats are always kept). */
  max_groups_per_step?: number;
};

/** Train LoRA adapters instead of all weights; the reference is the adapter-free model. */
export type LoraSpec = {
  /** Rank of the adapters. */
  r?: number;
  /** Scaling numerator (scale = alpha / r). */
  alpha?: number;
  /** Dropout on the adapter input (0 keeps log-probs deterministic). */
  dropout?: number;
  /** Names of the linear layers that get adapters. */
  target_modules?: string[];
};

export type MetricList = {
  last_event_id: number;
  items: MetricRow[];
};

export type MetricRow = {
  step: number;
  metrics: { [key: string]: number };
};

/**
 * A sequence classifier (AutoModelForSequenceClassification) that scores prompt +
 * completion; in eval mode, never trained.
 */
export type ModelReward = {
  name?: "model";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Hugging Face model id or a local path inside the allowed model roots. */
  model: string;
  /** Completions scored per forward pass. */
  batch_size?: number;
  /** Which output logit is the reward. */
  label_index?: number;
  /** Prompt + completion tokens kept (from the left) per scored text. */
  max_length?: number;
};

export type Preset = {
  name: string;
  title: string;
  description: string;
  spec: { [key: string]: any };
};

export type PresetList = {
  items: Preset[];
};

/**
 * A function a package installed on the workers registers under the entry-point group
 * `grpo.rewards`, called as TRL calls reward functions:
 * `fn(prompts, completions, **kwargs) -> list[float | None]`, kwargs holding `answer` and
 * every extra field of the records, one value per completion.
 */
export type PythonReward = {
  name?: "python";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Entry point name in group `grpo.rewards`; the API accepts only installed ones. */
  function: string;
};

/** 1 when `pattern` is found anywhere in the completion, else 0. */
export type RegexReward = {
  name?: "regex";
  /** Key of this function's metrics and inspector column, unique in a spec; default `name`. */
  label?: string;
  /** Weight of this function in the total reward. */
  weight?: number;
  /** Regular expression searched in the completion. */
  pattern: string;
};

/** Where the job runs. */
export type ResourcesSpec = {
  /** Celery queue; workers started for a GPU class listen on its queue. */
  queue?: string;
  /** Free memory (GiB) the job needs on its device; a worker with less leaves it queued. */
  min_free_memory_gb?: number | null;
};

export type RunList = {
  items: RunOut[];
  next_cursor: string | null;
};

export type RunOut = {
  id: string;
  name: string;
  status: RunStatus;
  spec: { [key: string]: any };
  package_version: string;
  step: number;
  total_steps: number;
  last_metrics: { [key: string]: number } | null;
  error: string | null;
  worker: string | null;
  device: string | null;
  attempts: number;
  is_cancel_requested: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  heartbeat_at: string | null;
};

/**
 * Where a run is: queued -> running -> one of the final three; resume sends a failed or
 * cancelled run back to queued, and a stale running one is re-queued or failed. The API's
 * `status` (and so the dashboard's type of it) is this enum.
 */
export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";

export type ValidationError = {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: { [key: string]: unknown };
};

export type WorkerList = {
  items: WorkerOut[];
};

export type WorkerOut = {
  name: string;
  queues: string[];
  device: string;
  free_memory_mb: number | null;
  run_id: string | null;
  started_at: string;
  last_seen_at: string;
};
