// The run page's curve panels: which GRPO metrics share a chart, how each is drawn, and a
// card's headline value (app/static/js/curves.js lays them out on one zoomable step axis).

import { outcomeShares } from './bins.js';
import { ema, formatValue } from './charts.js';
import { pct } from './format.js';

const RED = '#f04438',
  GREEN = '#12b76a',
  BLUE = '#2e90fa',
  GREY = '#98a2b3',
  INDIGO = '#4f46e5';
const NO_SIGNAL = 0.5;

export const PANELS = [
  { id: 'reward', title: 'Reward', hint: 'mean ± std · per function', value: 'reward', build: rewardPanel },
  {
    id: 'eval',
    title: 'Held-out eval',
    hint: 'training reward vs held-out reward · accuracy',
    value: 'eval/accuracy',
    build: evalPanel,
    isOptional: true,
  },
  { id: 'kl', title: 'KL to reference', hint: 'k3 · β in force (right)', value: 'kl', build: klPanel },
  {
    id: 'logprob-gap',
    title: 'vLLM log-prob gap',
    hint: '|trainer − vLLM| log-prob of sampled tokens · share the IS correction truncated or masked (right)',
    value: 'generation/logprob_diff_mean',
    build: logprobGapPanel,
    isOptional: true,
  },
  {
    id: 'outcomes',
    title: 'Group outcomes',
    hint: 'orange strip: most groups give no signal',
    value: 'no_signal',
    unit: '%',
    build: outcomesPanel,
  },
  { id: 'loss', title: 'Loss', hint: 'clipped surrogate + β·KL', value: 'loss', build: simple(['loss']) },
  {
    id: 'entropy',
    title: 'Entropy',
    hint: 'mean token entropy · share masked by top_entropy_quantile (right)',
    value: 'entropy',
    build: entropyPanel,
  },
  {
    id: 'length',
    title: 'Completion length',
    hint: 'tokens · truncated share (right)',
    value: 'completions/mean_length',
    build: lengthPanel,
  },
  {
    id: 'clip',
    title: 'Clip ratios',
    hint: 'share of tokens clipped',
    value: 'clip_ratio/region',
    unit: '%',
    build: clipPanel,
  },
  {
    id: 'dynamic',
    title: 'Dynamic sampling',
    hint: 'groups dropped for no signal · rounds (right)',
    value: 'dynamic_sampling/dropped_groups',
    build: dynamicPanel,
    isOptional: true,
  },
  {
    id: 'async',
    title: 'Generation beside training',
    hint: 'staleness in policy versions · queued batches · busy share of generator and trainer (right)',
    value: 'async/staleness_mean',
    build: asyncPanel,
    isOptional: true,
  },
  {
    id: 'logged',
    title: 'Reward function metrics',
    hint: 'what reward functions logged with log_metric',
    value: '',
    build: loggedPanel,
    isOptional: true,
  },
  {
    id: 'tools',
    title: 'Tool calls',
    hint: 'per trajectory · per tool · failures and iteration limit (right)',
    value: 'tools/calls_per_trajectory',
    build: toolsPanel,
    isOptional: true,
  },
  { id: 'optim', title: 'Grad norm · learning rate', hint: 'lr on the right', value: 'grad_norm', build: optimPanel },
  {
    id: 'time',
    title: 'Step time',
    hint: 'generate · reward · reference · train',
    value: 'time/step',
    unit: 's',
    build: timePanel,
  },
];

function simple(keys) {
  return () => ({ lines: keys.map((key) => ({ key, name: key })) });
}

function rewardPanel(s, weight) {
  const mean = ema(s.column('reward') || [], weight);
  const std = ema(s.column('reward_std') || [], weight);
  const lower = mean.map((m, i) => (m == null || std[i] == null ? null : m - std[i]));
  const width = std.map((d) => (d == null ? null : 2 * d));
  // one function is the reward itself: its own line would only hide the mean
  const functions = s.rewardFunctions().length > 1 ? s.rewardFunctions() : [];
  const lines = [
    { key: 'reward:lower', name: 'lower', invisible: true, stack: 'band', smooth: false },
    { key: 'reward:band', name: '± std', band: true, stack: 'band', smooth: false, color: INDIGO },
    { key: 'reward', name: 'reward', color: INDIGO },
    ...functions.map((fn, i) => ({
      key: `rewards/${fn}/mean`,
      name: fn,
      dashed: true,
      color: [GREEN, '#f79009', '#ee46bc', '#15b79e', '#7a5af8'][i % 5],
    })),
  ];
  return { lines, extra: s.has('reward_std') ? { 'reward:lower': lower, 'reward:band': width } : {} };
}

/** Training and held-out rewards on one axis: the gap between them is the point. A run
 * without `eval` has no held-out metrics, and no chart: the training reward alone is the
 * Reward chart's. */
function evalPanel(s) {
  if (!s.names().some((name) => name.startsWith('eval/'))) return { lines: [] };
  return {
    lines: [
      { key: 'reward', name: 'train reward', color: INDIGO },
      { key: 'eval/reward', name: 'eval reward', color: GREEN, sparse: true, smooth: false },
      { key: 'eval/accuracy', name: 'eval accuracy', color: '#f79009', sparse: true, smooth: false, dashed: true },
    ],
  };
}

function klPanel() {
  return {
    lines: [
      { key: 'kl', name: 'kl', color: RED },
      { key: 'beta', name: 'β', axis: 1, color: GREY, dashed: true, stepped: true, smooth: false },
    ],
    axes: [{}, { min: 0, scale: false }],
  };
}

/** use_vllm runs: how far the engine's sampling log-probs are from the trainer's, and how
 * many loss tokens importance_correction truncated or masked. */
function logprobGapPanel() {
  return {
    lines: [
      { key: 'generation/logprob_diff_mean', name: 'mean', color: RED },
      { key: 'generation/logprob_diff_max', name: 'max', color: RED, dashed: true },
      { key: 'generation/is_corrected_share', name: 'corrected', axis: 1, unit: '%', color: GREY, dashed: true },
    ],
    axes: [{ min: 0 }, { unit: '%', min: 0, max: 1, scale: false }],
  };
}

function outcomesPanel(s) {
  const shares = outcomeShares(s);
  return {
    lines: [
      { key: 'outcome:all_fail', name: 'all fail', area: true, stack: 'o', color: RED, unit: '%' },
      { key: 'outcome:all_pass', name: 'all pass', area: true, stack: 'o', color: GREEN, unit: '%' },
      { key: 'outcome:mixed', name: 'mixed', area: true, stack: 'o', color: BLUE, unit: '%' },
      { key: 'outcome:no_signal', name: 'no signal', invisible: true, smooth: false, unit: '%', z: 5 },
    ],
    extra: shares ? Object.fromEntries(Object.entries(shares).map(([k, v]) => [`outcome:${k}`, v])) : {},
    // the axis runs to 112%: the strip above 100% carries the no-signal warning bands
    axes: [{ unit: '%', min: 0, max: 1.12, interval: 0.25, scale: false, hideAbove: 1 }],
    markArea: shares ? noSignalBands(s.steps, shares.no_signal) : null,
  };
}

/** Step ranges where all-fail plus all-pass groups are the majority (no gradient signal). */
function noSignalBands(steps, noSignal) {
  const ranges = [];
  const minGap = Math.max(1, ((steps[steps.length - 1] || 0) - (steps[0] || 0)) / 300);
  steps.forEach((step, i) => {
    if (!(noSignal[i] > NO_SIGNAL)) return;
    const last = ranges[ranges.length - 1];
    if (last && step - last[1] <= minGap) last[1] = step;
    else ranges.push([step, step]);
  });
  if (!ranges.length) return null;
  return {
    silent: true,
    itemStyle: { color: '#f79009' },
    data: ranges.map(([a, b]) => [
      { xAxis: a - 0.5, yAxis: 1.04 },
      { xAxis: b + 0.5, yAxis: 1.1 },
    ]),
  };
}

/** Top of a share axis: a round value just above the data, never past 100%. */
function shareMax({ max }) {
  if (!(max > 0)) return 0.01;
  const step = 10 ** Math.floor(Math.log10(max));
  const nice = [1, 2, 2.5, 5, 10].map((m) => m * step).find((v) => v >= max);
  return Math.min(1, nice ?? 1);
}

function lengthPanel() {
  return {
    lines: [
      { key: 'completions/mean_length', name: 'mean', color: INDIGO },
      { key: 'completions/max_length', name: 'max', color: GREY, dashed: true },
      { key: 'completions/min_length', name: 'min', color: '#d0d5dd', dashed: true },
      { key: 'completions/clipped_ratio', name: 'truncated', axis: 1, unit: '%', color: '#f79009' },
    ],
    axes: [{}, { unit: '%', min: 0, max: shareMax, scale: false }],
  };
}

function entropyPanel() {
  return {
    lines: [
      { key: 'entropy', name: 'entropy', color: INDIGO },
      { key: 'entropy_masked_share', name: 'masked', axis: 1, unit: '%', color: GREY, dashed: true },
    ],
    axes: [{}, { unit: '%', min: 0, max: 1, scale: false }],
  };
}

function dynamicPanel() {
  return {
    lines: [
      { key: 'dynamic_sampling/dropped_groups', name: 'dropped groups', color: '#f79009' },
      { key: 'dynamic_sampling/signal_groups', name: 'trained with signal', color: BLUE },
      {
        key: 'dynamic_sampling/rounds',
        name: 'rounds',
        axis: 1,
        color: GREY,
        dashed: true,
        stepped: true,
        smooth: false,
      },
    ],
    axes: [
      { min: 0, scale: false },
      { min: 0, scale: false },
    ],
  };
}

/** async_generation runs: how many policy versions old the trained groups were, what
 * waited in the queue, groups dropped as too stale, and how busy each side was. */
function asyncPanel() {
  return {
    lines: [
      { key: 'async/staleness_mean', name: 'staleness', color: INDIGO },
      { key: 'async/staleness_max', name: 'max staleness', color: INDIGO, dashed: true, stepped: true, smooth: false },
      { key: 'async/queue_depth', name: 'queued', color: GREY, dashed: true, stepped: true, smooth: false },
      { key: 'async/dropped_stale', name: 'dropped as stale', color: RED, stepped: true, smooth: false },
      { key: 'async/generator_busy', name: 'generator busy', axis: 1, unit: '%', color: '#f79009' },
      { key: 'async/trainer_busy', name: 'trainer busy', axis: 1, unit: '%', color: BLUE },
    ],
    axes: [
      { min: 0, scale: false },
      { unit: '%', min: 0, max: 1, scale: false },
    ],
  };
}

function toolsPanel(s) {
  // tools/<name>/calls of each tool the run's trajectories called, as dashed lines
  const names = s.names().filter((n) => n.startsWith('tools/') && n.endsWith('/calls'));
  return {
    lines: [
      { key: 'tools/calls_per_trajectory', name: 'calls / trajectory', color: INDIGO },
      ...names.map((key, i) => ({
        key,
        name: key.slice('tools/'.length, -'/calls'.length),
        dashed: true,
        color: ['#15b79e', '#7a5af8', '#ee46bc', '#f79009'][i % 4],
      })),
      { key: 'tools/failure_rate', name: 'failed', axis: 1, unit: '%', color: RED },
      { key: 'tools/iteration_limit_share', name: 'at iteration limit', axis: 1, unit: '%', color: GREY, dashed: true },
      { key: 'time/tools', name: 'tool time (s)', color: '#f79009', dashed: true },
    ],
    axes: [
      { min: 0, scale: false },
      { unit: '%', min: 0, max: 1, scale: false },
    ],
  };
}

function clipPanel() {
  return {
    lines: [
      { key: 'clip_ratio/region', name: 'region', color: INDIGO, unit: '%' },
      { key: 'clip_ratio/low', name: 'low', color: RED, unit: '%' },
      { key: 'clip_ratio/high', name: 'high', color: GREEN, unit: '%' },
      { key: 'clip_ratio/delta', name: 'delta cap', color: '#f79009', unit: '%', dashed: true },
      { key: 'clip_ratio/cispo', name: 'cispo cap', color: '#7a5af8', unit: '%', dashed: true },
    ],
    axes: [{ unit: '%', min: 0, max: shareMax, scale: false }],
  };
}

function optimPanel() {
  return {
    lines: [
      { key: 'grad_norm', name: 'grad norm', color: INDIGO },
      { key: 'learning_rate', name: 'lr', axis: 1, color: GREY, dashed: true, stepped: true, smooth: false },
    ],
    axes: [{}, { scale: true }],
  };
}

/** Every `rewards/<label>/<name>` a reward function logged (TRL's log_metric), one line each. */
function loggedPanel(s) {
  const keys = s.names().filter((n) => /^rewards\/[^/]+\/[^/]+$/.test(n) && !/\/(mean|std)$/.test(n));
  const colors = [INDIGO, GREEN, '#f79009', '#ee46bc', '#15b79e', '#7a5af8'];
  return { lines: keys.map((key, i) => ({ key, name: key.slice('rewards/'.length), color: colors[i % 6] })) };
}

function timePanel(s) {
  // the reward phase of each reward label, as dashed lines over the stacked phases
  const labels = s.names().filter((n) => n.startsWith('time/reward/'));
  return {
    lines: [
      { key: 'time/generate', name: 'generate', area: true, stack: 't', color: INDIGO, unit: 's' },
      { key: 'time/reward', name: 'reward', area: true, stack: 't', color: '#f79009', unit: 's' },
      { key: 'time/reference', name: 'reference', area: true, stack: 't', color: GREY, unit: 's' },
      { key: 'time/train', name: 'train', area: true, stack: 't', color: GREEN, unit: 's' },
      { key: 'time/dynamic_sampling', name: 'extra rounds', dashed: true, color: RED, unit: 's' },
      ...labels.map((key, i) => ({
        key,
        name: `reward: ${key.slice('time/reward/'.length)}`,
        dashed: true,
        color: ['#f79009', '#ee46bc', '#15b79e', '#7a5af8'][i % 4],
        unit: 's',
      })),
    ],
    axes: [{ unit: 's', min: 0, scale: false }],
  };
}

/** A card's headline: its panel's latest value (the no-signal share as a percentage). */
export function headValue(panel, s) {
  if (!s.size) return '';
  if (panel.value === 'no_signal') {
    const shares = outcomeShares(s);
    const latest = shares ? shares.no_signal[shares.no_signal.length - 1] : null;
    return latest == null ? '' : `no signal ${pct(latest, 0)}`;
  }
  const value = panel.value ? s.latest(panel.value) : null; // '' : no one headline value
  return value == null ? '' : formatValue(value, panel.unit);
}
