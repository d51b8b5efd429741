// A run's step metrics in columns (one array per metric, aligned with `steps`), merged from
// REST answers and live events alike: a step seen twice is overwritten, never doubled. A long
// run's history comes thinned (GET /metrics `thinned`): `hidden` counts the stored steps it
// left out, until a zoom window's rows bring them in (`fill`).

export class RunSeries {
  constructor() {
    this.steps = [];
    this.columns = new Map();
    this.histograms = new Map();
    this.version = 0;
    this.histogramVersion = 0;
    /** stored steps a thinned answer stood for but did not hold */
    this.hidden = 0;
  }

  get last() {
    return this.steps.length ? this.steps[this.steps.length - 1] : 0;
  }

  get size() {
    return this.steps.length;
  }

  /** Steps trained, held or left out by a thinned answer: step 0 (the evaluation before
   * training, when the run has one) is not one. */
  get trained() {
    return (this.steps[0] === 0 ? this.steps.length - 1 : this.steps.length) + this.hidden;
  }

  /** The first trained step; 0 when none. */
  get first() {
    return this.steps.find((step) => step > 0) ?? 0;
  }

  has(name) {
    return this.columns.has(name);
  }

  names() {
    return [...this.columns.keys()];
  }

  column(name) {
    return this.columns.get(name) || null;
  }

  /**
   * Loads a run's history (REST rows in step order); falls back to add() when not empty.
   * @param {any[]} rows
   * @param {{ steps: number } | null} [thinned] the answer's `thinned`: how many stored steps the rows stand for
   */
  load(rows, thinned = null) {
    if (thinned) this.hidden += Math.max(0, thinned.steps - rows.length);
    if (this.steps.length || rows.some((r, i) => i && r.step <= rows[i - 1].step)) {
      for (const row of rows) this.add(row);
      return;
    }
    const n = rows.length;
    this.steps = rows.map((r) => r.step);
    rows.forEach((row, i) => {
      for (const name in row.metrics) {
        let column = this.columns.get(name);
        if (!column) {
          column = new Array(n).fill(null);
          this.columns.set(name, column);
        }
        const value = row.metrics[name];
        column[i] = typeof value === 'number' ? value : null;
      }
      if (hasHistograms(row)) this.histograms.set(row.step, histogramsOf(row));
    });
    this.version += 1;
    this.histogramVersion += 1;
  }

  /** Adds or replaces one step's metrics (and histograms, when the row carries them). */
  add(row) {
    if (row.metrics && !this.same(row)) {
      const index = this.slot(row.step);
      for (const [name, value] of Object.entries(row.metrics)) {
        this.ensure(name)[index] = typeof value === 'number' ? value : null;
      }
      this.version += 1;
    }
    if (hasHistograms(row)) {
      this.histograms.set(row.step, histogramsOf(row));
      this.histogramVersion += 1;
    }
  }

  /** Rows of steps a thinned answer left out (a zoom window read again); true when any was new. */
  fill(rows) {
    let added = 0;
    for (const row of rows) {
      const index = this.bisect(row.step);
      if (this.steps[index] === row.step) continue;
      this.add(row);
      added += 1;
    }
    this.hidden = Math.max(0, this.hidden - added);
    return added > 0;
  }

  /** Histogram rows read over REST (GET /histograms); a step the stream already gave is kept. */
  loadHistograms(rows) {
    for (const row of rows) {
      if (!this.histograms.has(row.step)) this.histograms.set(row.step, histogramsOf(row));
    }
    this.histogramVersion += 1;
  }

  /** True when `row` repeats metrics already held (a replayed event): nothing to redraw. */
  same(row) {
    const n = this.steps.length;
    if (!n || row.step > this.steps[n - 1] || row.step < this.steps[0]) return false;
    const index = this.bisect(row.step);
    if (this.steps[index] !== row.step) return false;
    return Object.entries(row.metrics).every(([name, value]) => this.columns.get(name)?.[index] === value);
  }

  /** Index of `step` in the columns, inserting an empty slot where it is new. */
  slot(step) {
    const n = this.steps.length;
    if (!n || step > this.steps[n - 1]) {
      this.steps.push(step);
      for (const column of this.columns.values()) column.push(null);
      return n;
    }
    const lo = this.bisect(step);
    if (this.steps[lo] !== step) {
      this.steps.splice(lo, 0, step);
      for (const column of this.columns.values()) column.splice(lo, 0, null);
    }
    return lo;
  }

  /** First index whose step is >= `step`. */
  bisect(step) {
    let lo = 0,
      hi = this.steps.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.steps[mid] < step) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  ensure(name) {
    let column = this.columns.get(name);
    if (!column) {
      column = new Array(this.steps.length).fill(null);
      this.columns.set(name, column);
    }
    return column;
  }

  /** Latest non-missing value of a metric. */
  latest(name) {
    const column = this.columns.get(name);
    if (!column) return null;
    for (let i = column.length - 1; i >= 0; i -= 1) if (column[i] != null) return column[i];
    return null;
  }

  /** Names of the reward functions, from `rewards/<fn>/mean`. */
  rewardFunctions() {
    return this.names()
      .filter((n) => /^rewards\/.+\/mean$/.test(n))
      .map((n) => n.slice(8, -5));
  }
}

function hasHistograms(row) {
  return Boolean(row.advantage_histogram || row.reward_histogram || row.group_reward_std_histogram);
}

/** A step's histograms by kind; missing or empty ones (steps stored before a kind existed) are null. */
function histogramsOf(row) {
  const counts = (list) => (list?.length ? list : null);
  return {
    advantage: counts(row.advantage_histogram),
    reward: counts(row.reward_histogram),
    spread: counts(row.group_reward_std_histogram),
  };
}
