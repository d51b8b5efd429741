// Histogram bins, the same as grpo/report.py so a step's counts compare across runs.

export const ADVANTAGE_EDGES = Array.from({ length: 25 }, (_, i) => Math.round((-3 + 0.25 * i) * 100) / 100);
export const REWARD_EDGES = Array.from({ length: 31 }, (_, i) => Math.round((-1 + 0.1 * i) * 100) / 100);
/** Group reward spread: each group's population reward std, bins of 0.05 on [0, 1.5]. */
export const GROUP_STD_EDGES = Array.from({ length: 31 }, (_, i) => Math.round(0.05 * i * 100) / 100);

/** Counts of values in [edges[i], edges[i+1]); out-of-range values land in the end bins. */
export function histogram(values, edges) {
  const counts = new Array(edges.length - 1).fill(0);
  for (const v of values) {
    let i = 0;
    while (i < counts.length - 1 && v >= edges[i + 1]) i += 1;
    counts[i] += 1;
  }
  return counts;
}

export function binLabels(edges) {
  return edges.slice(0, -1).map((lo, i) => `${lo}…${edges[i + 1]}`);
}

/** Group outcome as GroupReport.outcome (grpo/report.py) words it: pass = reward > 0. */
export function outcome(rewards) {
  const passes = rewards.filter((r) => r > 0).length;
  if (passes === rewards.length) return 'all_pass';
  return passes === 0 ? 'all_fail' : 'mixed';
}

export const OUTCOME_LABEL = { all_fail: 'all fail', all_pass: 'all pass', mixed: 'mixed' };
export const OUTCOME_COLOR = { all_fail: '#f04438', all_pass: '#12b76a', mixed: '#2e90fa' };

/** [min, Q1, median, Q3, max] with linear interpolation between order statistics. */
export function fiveNumbers(values) {
  const v = [...values].sort((a, b) => a - b);
  const q = (p) => {
    const pos = (v.length - 1) * p,
      lo = Math.floor(pos),
      hi = Math.ceil(pos);
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
  };
  return [v[0], q(0.25), q(0.5), q(0.75), v[v.length - 1]];
}

/**
 * Per-step shares of all-fail, all-pass and mixed groups. The trainer reports counts
 * (`groups/all_fail` …); dividing by their sum gives shares whether counts or shares come in.
 */
export function outcomeShares(series) {
  const fail = series.column('groups/all_fail'),
    pass = series.column('groups/all_pass'),
    mixed = series.column('groups/mixed');
  if (!fail || !pass || !mixed) return null;
  const share = (column) =>
    column.map((v, i) => {
      const total = (fail[i] ?? 0) + (pass[i] ?? 0) + (mixed[i] ?? 0);
      return v == null || !total ? null : v / total;
    });
  const out = { all_fail: share(fail), all_pass: share(pass), mixed: share(mixed) };
  out.no_signal = out.all_fail.map((f, i) => (f == null ? null : f + out.all_pass[i]));
  return out;
}
