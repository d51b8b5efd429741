// The new-run page's reward check: the spec's rewards probed with made-up completions of its
// first records (POST /api/rewards/preflight), before a run is spent on them. Each finding
// is a sentence; each probe's completion and scores can be read in the table below them.

import { preflightRewards } from './api.js';
import { fill, h } from './dom.js';
import { errorText } from './shell.js';

const RECORDS = 3;
const SHOWN_CHARS = 80;

/**
 * Wires the panel's button to the spec the editor holds now.
 * @param {HTMLElement} panel the panel's section
 * @param {() => object | null} currentSpec the editor's spec, or null while it does not parse
 */
export function mountRewardCheck(panel, currentSpec) {
  const button = /** @type {HTMLButtonElement} */ (panel.querySelector('#preflight-button'));
  const status = /** @type {HTMLElement} */ (panel.querySelector('#preflight-status'));
  button.addEventListener('click', async () => {
    const spec = currentSpec();
    if (!spec) {
      status.textContent = 'Fix the spec first: it does not parse.';
      return;
    }
    button.disabled = true;
    status.textContent = `Probing the rewards on ${RECORDS} records…`;
    try {
      show(panel, await preflightRewards({ spec, records: RECORDS }));
      status.textContent = '';
    } catch (error) {
      status.textContent = errorText(error);
    } finally {
      button.disabled = false;
    }
  });
}

/** @param {HTMLElement} panel @param {import('./api.js').PreflightReport} report */
function show(panel, report) {
  const findings = report.findings.map((f) => h('li', { class: 'finding' }, f.message));
  const none = `No probe scores at or above a correct completion (${report.records} records).`;
  const stopped = report.stopped ? [h('li', {}, `Stopped early: ${report.stopped}`)] : [];
  fill(/** @type {HTMLElement} */ (panel.querySelector('#preflight-findings')), ...findings, ...stopped);
  fill(/** @type {HTMLElement} */ (panel.querySelector('#preflight-summary')), findings.length ? '' : none);
  const labels = report.probes.length ? Object.keys(report.probes[0].result.scores) : [];
  const rows = report.probes.map((p) =>
    h(
      'tr',
      { dataset: { probe: p.probe } },
      h('td', {}, String(p.record)),
      h('td', {}, p.probe),
      h('td', { class: 'completion', title: p.completion }, shorten(p.completion)),
      ...labels.map((label) => h('td', { class: 'num' }, cell(p.result, label))),
    ),
  );
  const head = h('tr', {}, ...['record', 'probe', 'completion', ...labels].map((t) => h('th', {}, t)));
  const probes = /** @type {HTMLDetailsElement} */ (panel.querySelector('#preflight-probes'));
  fill(/** @type {HTMLElement} */ (probes.querySelector('table')), h('thead', {}, head), h('tbody', {}, ...rows));
  probes.hidden = false;
}

/** @param {import('./api.js').PreflightReport['probes'][number]['result']} result @param {string} label */
function cell(result, label) {
  const failed = (result.failures ?? []).find((f) => f.label === label);
  if (failed) return failed.kind;
  const score = result.scores[label];
  return score === null || score === undefined ? 'null' : String(Math.round(score * 1000) / 1000);
}

function shorten(text) {
  if (!text.trim()) return JSON.stringify(text);
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}…` : text;
}
