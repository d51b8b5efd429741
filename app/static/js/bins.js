// Histograms over the API's bin edges (GET /runs/{id}/histograms gives them, from
// grpo/report/), group outcomes' labels and colours, and per-step outcome shares.

/** @typedef {import('./openapi').GroupOutcome} GroupOutcome */

/**
 * Counts of values in [edges[i], edges[i+1]); out-of-range values land in the end bins.
 * @param {number[]} values
 * @param {number[]} edges
 */
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

// outcomes come from the API: grpo/report/outcome.py decides a pass, the store keeps the result
// every outcome the API can send has a label and a colour, or tsc says which is missing
/** @type {Record<GroupOutcome, string>} */
export const OUTCOME_LABEL = { all_fail: 'all fail', all_pass: 'all pass', mixed: 'mixed' };
/** @type {Record<GroupOutcome, string>} */
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
