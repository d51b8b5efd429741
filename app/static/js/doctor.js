// The run page's Doctor card: the run doctor's findings, one sentence each, a sparkline of
// the evidence, links to the steps and groups behind it, and "clone with this change".
// The reward preflight's findings (found before step 1, no curve) list each probe's
// completion with every function's score. Findings come from GET /diagnostics, then as
// `diagnosis` events on the run's stream (the newest event of a finding replaces it; a
// `withdrawn` one removes it). A long stored run is diagnosed a stretch at a time after the
// first read (`is_current` false): the card reads again every POLL_MS until it is current,
// each read replacing the last.

import { getDiagnostics } from './api.js';
import { fill, h, seg } from './dom.js';
import { errorText } from './shell.js';

/**
 * @typedef {import('./api.js').FindingOut} FindingOut
 * @typedef {import('./series.js').RunSeries} RunSeries
 */

const SEVERITY_ORDER = { critical: 0, warning: 1, info: 2 };
const SPARK_WIDTH = 140;
const SPARK_HEIGHT = 28;
const SPARK_CONTEXT = 20;
const SVG = 'http://www.w3.org/2000/svg';
const POLL_MS = 1000;

/**
 * The new-run page with the run's spec and each suggested field set (those with a value).
 * @param {string} runId
 * @param {FindingOut['suggestions']} suggestions
 */
export function cloneHref(runId, suggestions) {
  const params = new URLSearchParams({ from: runId });
  for (const s of suggestions)
    if (s.value !== null && s.value !== undefined) params.append('set', `${s.field}=${JSON.stringify(s.value)}`);
  return params.getAll('set').length ? `/runs/new?${params}` : null;
}

/**
 * Points (step, value) of the evidence metric: the page's own curve around the finding
 * (live), else the values the finding was written with.
 * @param {FindingOut} finding
 * @param {RunSeries} series
 */
function sparkPoints(finding, series) {
  const { metric } = finding.evidence;
  const column = series.column(metric);
  if (column) {
    const from = finding.first_step - SPARK_CONTEXT;
    const to = finding.status === 'open' ? Infinity : finding.last_step + SPARK_CONTEXT;
    const points = [];
    series.steps.forEach((step, i) => {
      const value = column[i];
      if (step >= from && step <= to && typeof value === 'number' && Number.isFinite(value)) points.push([step, value]);
    });
    if (points.length > 1) return points;
  }
  return finding.evidence.values;
}

/** An SVG polyline of the points, the finding's own steps shaded. */
function sparkline(points, finding) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${SPARK_WIDTH} ${SPARK_HEIGHT}`);
  svg.setAttribute('class', 'doctor-spark');
  svg.setAttribute('aria-label', `${finding.evidence.metric} over steps`);
  if (points.length < 2) return svg;
  const steps = points.map((p) => p[0]);
  const values = points.map((p) => p[1]);
  const [x0, x1] = [Math.min(...steps), Math.max(...steps)];
  const [y0, y1] = [Math.min(...values), Math.max(...values)];
  const x = (step) => ((step - x0) / (x1 - x0 || 1)) * (SPARK_WIDTH - 2) + 1;
  const y = (value) => SPARK_HEIGHT - 2 - ((value - y0) / (y1 - y0 || 1)) * (SPARK_HEIGHT - 4);
  const band = document.createElementNS(SVG, 'rect');
  const left = x(Math.max(x0, finding.first_step));
  band.setAttribute('x', String(left));
  band.setAttribute('width', String(Math.max(1, x(Math.min(x1, finding.last_step)) - left)));
  band.setAttribute('height', String(SPARK_HEIGHT));
  band.setAttribute('class', 'doctor-spark-band');
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', points.map(([s, v]) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(' '));
  line.setAttribute('class', 'doctor-spark-line');
  svg.append(band, line);
  return svg;
}

/** Severity, title and the steps it covers (an open one's last step moves on between its
 * writes: it reads "since"). */
function titleRow(finding, run) {
  if (!finding.evidence.metric)
    return h(
      'div',
      { class: 'doctor-title' },
      h('span', { class: `doctor-severity severity-${finding.severity}` }, finding.severity),
      h('strong', null, finding.title),
      h('span', { class: 'doctor-steps faint' }, 'reward preflight, before step 1'),
    );
  let steps = `since step ${finding.first_step}`;
  if (finding.status === 'resolved')
    steps =
      finding.first_step === finding.last_step
        ? `step ${finding.first_step}`
        : `steps ${finding.first_step}–${finding.last_step}`;
  return h(
    'div',
    { class: 'doctor-title' },
    h('span', { class: `doctor-severity severity-${finding.severity}` }, finding.severity),
    h('strong', null, finding.title),
    h('a', { class: 'doctor-steps', href: `${run}/steps/${seg(finding.first_step)}` }, steps),
    finding.status === 'resolved' ? h('span', { class: 'faint' }, 'resolved') : null,
  );
}

/** Links to the groups behind the finding, and its example completions. */
function examples(finding, run) {
  const { groups, completions } = finding.evidence;
  return [
    groups.length
      ? h(
          'div',
          { class: 'doctor-links' },
          'Groups: ',
          groups.map((g) =>
            h(
              'a',
              { href: `${run}/steps/${seg(g.step)}/groups/${seg(g.index)}`, title: g.note },
              `step ${g.step} #${g.index}`,
            ),
          ),
        )
      : null,
    completions.length
      ? h(
          'ul',
          { class: 'doctor-completions' },
          completions.map((c) =>
            h(
              'li',
              { dataset: { note: c.note ?? '' } },
              c.note ? h('span', { class: 'faint' }, `${c.note}: `) : null,
              h('code', null, c.text),
              ` scored ${c.reward}`,
              c.note ? ` (${perFunction(c.rewards)})` : null,
              '; answer ',
              h('code', null, c.answer),
            ),
          ),
        )
      : null,
  ];
}

/** Each function's score of a probe, or `failed` where it has none. */
function perFunction(rewards) {
  return Object.entries(rewards)
    .map(([label, score]) => `${label} ${score === null ? 'failed' : score}`)
    .join(', ');
}

/** The suggested spec changes and the link that opens a clone with them set. */
function changes(finding, runId) {
  if (!finding.suggestions.length) return null;
  const clone = cloneHref(runId, finding.suggestions);
  const field = (s) => (s.value === null ? s.field : `${s.field}: ${JSON.stringify(s.value)}`);
  return h(
    'div',
    { class: 'doctor-suggestions' },
    h(
      'ul',
      null,
      finding.suggestions.map((s) => h('li', null, h('code', null, field(s)), ` — ${s.reason}`)),
    ),
    clone ? h('a', { class: 'btn btn-ghost doctor-clone', href: clone }, 'Clone with this change') : null,
  );
}

export class DoctorCard {
  /**
   * @param {HTMLElement} el
   * @param {{ runId: string, series: RunSeries }} options
   */
  constructor(el, { runId, series }) {
    this.el = el;
    this.runId = runId;
    this.series = series;
    /** @type {Map<string, FindingOut>} */
    this.findings = new Map();
    /** @type {Set<string>} ids a `withdrawn` event removed: a slower first read does not bring them back */
    this.withdrawn = new Set();
    this.step = 0;
    this.isLoaded = false;
    this.isCurrent = true;
    this.drawnVersion = -1;
  }

  async load() {
    try {
      const found = await getDiagnostics(this.runId);
      if (!this.isCurrent) {
        // a read while the stored steps are caught up with: it has every finding so far
        this.findings = new Map(found.items.map((f) => [f.id, f]));
      }
      this.step = Math.max(this.step, found.step);
      for (const finding of found.items) {
        if (!this.findings.has(finding.id) && !this.withdrawn.has(finding.id)) this.findings.set(finding.id, finding);
      }
      this.isCurrent = found.is_current ?? true;
      if (!this.isCurrent) setTimeout(() => this.load(), POLL_MS);
      this.isLoaded = true;
      this.render();
    } catch (error) {
      fill(this.el, h('div', { class: 'doctor-empty' }, `The doctor could not be read: ${errorText(error)}`));
    }
  }

  /** A `diagnosis` event: the finding as last written, or `{id, status: 'withdrawn'}`. */
  onEvent(data) {
    if (data.status === 'withdrawn') {
      this.findings.delete(data.id);
      this.withdrawn.add(data.id);
    } else {
      this.findings.set(data.id, data);
      this.withdrawn.delete(data.id);
    }
    this.step = Math.max(this.step, data.last_step || 0);
    this.isLoaded = true;
    this.render();
  }

  /** Redraws the sparklines when the page's curves moved (the open findings' evidence grows). */
  update() {
    if (!this.isLoaded || this.series.version === this.drawnVersion) return;
    this.drawnVersion = this.series.version;
    // only the sparklines: the rest of the card changes with diagnosis events, and a card
    // rebuilt with every step would move under the reader's pointer
    for (const item of this.el.querySelectorAll('.doctor-item')) {
      const finding = this.findings.get(/** @type {HTMLElement} */ (item).dataset.finding ?? '');
      const old = item.querySelector('.doctor-spark');
      if (finding && old) old.replaceWith(sparkline(sparkPoints(finding, this.series), finding));
    }
  }

  sorted() {
    return [...this.findings.values()].sort(
      (a, b) =>
        (a.status === 'open' ? 0 : 1) - (b.status === 'open' ? 0 : 1) ||
        SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity] ||
        a.first_step - b.first_step,
    );
  }

  render() {
    this.drawnVersion = this.series.version;
    const items = this.sorted();
    const open = items.filter((f) => f.status === 'open').length;
    this.el.dataset.findings = String(items.length);
    this.el.dataset.current = String(this.isCurrent);
    fill(
      this.el,
      h(
        'div',
        { class: 'panel-head' },
        h('h2', null, 'Doctor'),
        h(
          'span',
          { class: 'hint' },
          [
            items.length ? `${open} open · ${items.length - open} resolved` : '',
            this.isCurrent ? '' : `reading the stored steps: through step ${this.step} so far`,
          ]
            .filter(Boolean)
            .join(' · ') || 'what is going wrong, the evidence, and what to change',
        ),
      ),
      items.length
        ? h(
            'ul',
            { class: 'doctor-list' },
            items.map((f) => this.item(f)),
          )
        : h(
            'div',
            { class: 'doctor-empty' },
            this.step || !this.isCurrent ? `Nothing found through step ${this.step}.` : 'Nothing found yet.',
          ),
    );
  }

  /** @param {FindingOut} finding */
  item(finding) {
    const run = `/runs/${seg(this.runId)}`;
    return h(
      'li',
      {
        class: `doctor-item doctor-${finding.severity} doctor-${finding.status}`,
        dataset: { finding: finding.id, rule: finding.rule },
      },
      titleRow(finding, run),
      h(
        'div',
        { class: 'doctor-body' },
        h('p', { class: 'doctor-message' }, finding.message),
        finding.evidence.metric
          ? h(
              'div',
              { class: 'doctor-evidence', title: finding.evidence.metric },
              sparkline(sparkPoints(finding, this.series), finding),
              h('code', null, finding.evidence.metric),
            )
          : null,
      ),
      examples(finding, run),
      changes(finding, this.runId),
    );
  }
}
