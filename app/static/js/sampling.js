// Which steps a curve draws when a run has more steps than its chart has pixels: every step
// inside the zoom window, elsewhere each bucket's lowest and highest point of the panel's
// first curve (so spikes stay visible), and every point of a sparse curve (an evaluation every
// k steps: thinned by the dense curve's extremes, it would lose most of its few points).
// Values are never averaged: a drawn point is a real step.
//
// A long run's history comes thinned the same way by the server (GET /metrics max_points,
// app/store/thinning.py), for every metric at once: the page asks for MAX_POINTS rows, and
// for a zoom window's rows when it zooms in (curves.js).

// a chart is ~400 px wide: 500 buckets keep each pixel column's lowest and highest point
export const MAX_POINTS = 1000;

/**
 * Indices of `steps` to draw, or null to draw them all. `window` is [firstStep, lastStep].
 * @param {number[]} steps
 * @param {(number | null)[] | null | undefined} values
 * @param {[number, number] | null} [window]
 * @param {number} [max]
 * @param {(number | null)[][]} [sparse] columns whose every non-null point is kept
 * @returns {number[] | null}
 */
export function keepIndices(steps, values, window = null, max = MAX_POINTS, sparse = []) {
  const n = steps.length;
  if (n <= max) return null;
  let a = 0,
    b = 0;
  if (window) {
    a = lowerBound(steps, window[0]);
    b = lowerBound(steps, window[1] + 1);
  }
  const keep = new Set([0, n - 1]);
  const inside = b - a;
  if (inside > 0) {
    const outside = n - inside;
    extremes(values, 0, a, Math.ceil((max / 4) * (a / outside)), keep);
    if (inside <= max) for (let i = a; i < b; i += 1) keep.add(i);
    else extremes(values, a, b, max / 2 - 1, keep);
    extremes(values, b, n, Math.ceil((max / 4) * ((n - b) / outside)), keep);
  } else {
    extremes(values, 0, n, max / 2 - 1, keep);
  }
  for (const column of sparse) {
    column.forEach((v, i) => {
      if (v != null) keep.add(i);
    });
  }
  return [...keep].sort((x, y) => x - y);
}

function extremes(values, from, to, buckets, keep) {
  if (to <= from || buckets < 1) return;
  const size = Math.max(1, Math.ceil((to - from) / buckets));
  for (let start = from; start < to; start += size) {
    const end = Math.min(to, start + size);
    let lo = -1,
      hi = -1;
    for (let i = start; i < end; i += 1) {
      const v = values ? values[i] : null;
      if (v == null) continue;
      if (lo === -1 || v < values[lo]) lo = i;
      if (hi === -1 || v > values[hi]) hi = i;
    }
    keep.add(lo === -1 ? start : lo);
    if (hi !== -1) keep.add(hi);
  }
}

function lowerBound(steps, step) {
  let lo = 0,
    hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] < step) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function pick(column, keep) {
  return keep ? keep.map((i) => column[i]) : column;
}
