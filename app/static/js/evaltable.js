// The run page's held-out examples: the table of one evaluated step (prompt, answer,
// completion, rewards, pass) and, for a clicked example, its history across evaluations.

import { getEvals } from './api.js';
import { $, h } from './dom.js';

/** @typedef {import('./openapi').EvalExample} EvalExample */

export class EvalTable {
  /** @param {string} runId */
  constructor(runId) {
    this.runId = runId;
    /** @type {number[]} */
    this.steps = [];
    this.select = /** @type {HTMLSelectElement} */ ($('#eval-step'));
    this.select.addEventListener('change', () => this.show(Number(this.select.value)));
  }

  /** Reads which steps were evaluated; shows the newest unless another one is chosen. */
  async refresh() {
    const { items } = await getEvals(this.runId);
    const steps = items.map((row) => row.step);
    if (!steps.length) return;
    const follow = !this.steps.length || Number(this.select.value) === this.steps[this.steps.length - 1];
    this.steps = steps;
    this.select.replaceChildren(...steps.map((step) => h('option', { value: String(step) }, `step ${step}`)));
    $('#eval-panel').hidden = false;
    const shown = follow ? steps[steps.length - 1] : Number(this.select.value);
    this.select.value = String(shown);
    await this.show(shown);
  }

  /** @param {number} step */
  async show(step) {
    const { items } = await getEvals(this.runId, { examples: true, step });
    const examples = items[0]?.examples || [];
    const rows = examples.map((example) => exampleRow(example, () => this.history(example.prompt_id)));
    $('#eval-table').replaceChildren(
      h(
        'table',
        { class: 'table eval-examples' },
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            ['', 'prompt', 'answer', 'completion', 'rewards'].map((t) => h('th', null, t)),
          ),
        ),
        h('tbody', null, rows),
      ),
    );
  }

  /** @param {string} promptId */
  async history(promptId) {
    const { items } = await getEvals(this.runId, { examples: true });
    const el = $('#eval-history');
    const points = items.flatMap((row) => {
      const example = (row.examples || []).find((e) => e.prompt_id === promptId);
      return example ? [{ step: row.step, example }] : [];
    });
    el.replaceChildren(
      h('strong', null, `${promptId} across evaluations: `),
      ...points.map(({ step, example }) =>
        h(
          'span',
          {
            class: `eval-point ${example.passes.every(Boolean) ? 'is-pass' : 'is-fail'}`,
            dataset: { step: String(step) },
          },
          `step ${step} ${mark(example.passes)} ${JSON.stringify(example.completions[0] ?? '')}`,
        ),
      ),
    );
    el.hidden = false;
  }
}

/** @param {boolean[]} passes */
function mark(passes) {
  const passed = passes.filter(Boolean).length;
  return passes.length === 1 ? (passed ? '✓' : '✗') : `${passed}/${passes.length}`;
}

/**
 * @param {EvalExample} example
 * @param {() => void} onClick
 */
function exampleRow(example, onClick) {
  const rewards = Object.entries(example.rewards)
    .map(([label, values]) => `${label} ${values.map((v) => (v == null ? '–' : v.toFixed(2))).join(' ')}`)
    .join(' · ');
  return h(
    'tr',
    { class: 'eval-row', dataset: { promptId: example.prompt_id }, onclick: onClick },
    h('td', { class: example.passes.every(Boolean) ? 'pass' : 'fail' }, mark(example.passes)),
    h('td', null, h('code', null, example.prompt)),
    h('td', null, h('code', null, example.answer)),
    h('td', null, h('code', null, example.completions.join(' | '))),
    h('td', null, rewards),
  );
}
