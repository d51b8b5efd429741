// Runs page: the demo first, then a live table with filter, search and actions.

import { runActions } from './actions.js';
import { createRun, listPresets, listRuns } from './api.js';
import { progressBar, statusPill } from './badges.js';
import { $, $$, fill, h, seg } from './dom.js';
import { duration, num, runSeconds, since } from './format.js';
import { errorText, initShell, stateBox, toast } from './shell.js';
import { askToken, withToken } from './token.js';
import { showWorkers } from './workers.js';

const PAGE = 50;
const POLL_MS = 3000;
/**
 * @type {{
 *   status: string, q: string, items: import('./api.js').RunOut[],
 *   cursor: string | null, limit: number, selected: Set<string>, loaded: boolean,
 * }}
 */
const state = { status: '', q: '', items: [], cursor: null, limit: PAGE, selected: new Set(), loaded: false };

function readQuery() {
  const params = new URLSearchParams(window.location.search);
  state.status = params.get('status') || '';
  state.q = params.get('q') || '';
  $('#run-search').value = state.q;
  for (const chip of $$('#status-filter .chip'))
    chip.setAttribute('aria-pressed', String(chip.dataset.status === state.status));
}

function writeQuery() {
  const params = new URLSearchParams();
  if (state.status) params.set('status', state.status);
  if (state.q) params.set('q', state.q);
  const query = params.toString();
  window.history.replaceState(null, '', query ? `/?${query}` : '/');
}

async function load({ quiet = false } = {}) {
  if (!quiet && !state.loaded) fill($('#runs-table'), stateBox('loading', 'Loading runs…'));
  try {
    const page = await listRuns({ status: state.status, q: state.q, limit: state.limit });
    state.items = page.items;
    state.cursor = page.next_cursor;
    state.loaded = true;
    render();
  } catch (error) {
    if (quiet && state.loaded) return;
    const needsToken = error.status === 401 || error.status === 403;
    fill(
      $('#runs-table'),
      stateBox(
        'error',
        needsToken ? 'This server needs an API token to show runs' : 'Could not load runs',
        errorText(error),
        needsToken
          ? h(
              'button',
              {
                class: 'btn btn-primary',
                type: 'button',
                onclick: async () => {
                  if (await askToken()) load();
                },
              },
              'Enter token',
            )
          : h('button', { class: 'btn btn-ghost', type: 'button', onclick: () => load() }, 'Retry'),
      ),
    );
  }
}

async function loadMore() {
  const page = await listRuns({ status: state.status, q: state.q, limit: PAGE, cursor: state.cursor });
  state.items.push(...page.items);
  state.cursor = page.next_cursor;
  state.limit = state.items.length;
  render();
}

function render() {
  const table = $('#runs-table');
  $('#more-button').hidden = !state.cursor;
  $('#runs-count').textContent = state.items.length
    ? `${state.items.length}${state.cursor ? '+' : ''} run${state.items.length === 1 ? '' : 's'}`
    : '';
  $('#demo').classList.toggle('is-compact', state.items.length > 0 || Boolean(state.status || state.q));
  if (!state.items.length) {
    fill(
      table,
      state.status || state.q
        ? stateBox('empty', 'No runs match', 'Try another status or search term.')
        : stateBox('empty', 'No runs yet', 'Start the demo above, or write a spec on the New run page.'),
    );
    return;
  }
  fill(
    table,
    h(
      'table',
      { class: 'table runs-table' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', { class: 'col-check' }, ''),
          h('th', null, 'Run'),
          h('th', null, 'Status'),
          h('th', null, 'Progress'),
          h('th', { class: 'num' }, 'Reward'),
          h('th', { class: 'num' }, 'KL'),
          h('th', null, 'Started'),
          h('th', { class: 'num' }, 'Duration'),
          h('th', { class: 'col-actions' }, ''),
        ),
      ),
      h('tbody', null, state.items.map(row)),
    ),
  );
  updateCompareButton();
}

/** The run doctor's open findings (warning or above), linked to the run page's Doctor card. */
function doctorMark(run) {
  const mark = run.doctor;
  if (!mark) return null;
  const what = `${mark.open} open finding${mark.open === 1 ? '' : 's'} of the run doctor, the worst ${mark.severity}`;
  return h(
    'a',
    {
      class: `doctor-mark doctor-mark-${mark.severity}`,
      href: `/runs/${seg(run.id)}#doctor`,
      title: what,
      'aria-label': what,
    },
    `⚕ ${mark.open}`,
  );
}

function row(run) {
  const metrics = run.last_metrics || {};
  const spec = run.spec || {};
  return h(
    'tr',
    { dataset: { runId: run.id, status: run.status } },
    h(
      'td',
      { class: 'col-check' },
      h('input', {
        type: 'checkbox',
        'aria-label': `Select ${run.name} for comparison`,
        checked: state.selected.has(run.id),
        onchange: (event) => {
          toggleSelected(run.id, event.target.checked);
        },
      }),
    ),
    h(
      'td',
      { class: 'col-name' },
      h('a', { class: 'run-link', href: `/runs/${seg(run.id)}` }, run.name),
      doctorMark(run),
      h(
        'div',
        { class: 'sub' },
        h('code', null, run.id.slice(0, 8)),
        ' · ',
        spec.model || '',
        spec.num_generations ? ` · G=${spec.num_generations}` : '',
        run.submitted_by ? h('span', { class: 'run-owner' }, ` · by ${run.submitted_by}`) : '',
      ),
    ),
    h(
      'td',
      { class: 'col-status' },
      statusPill(run.status, { cancelling: run.is_cancel_requested }),
      run.error ? h('div', { class: 'sub error-text', title: run.error }, run.error) : null,
      run.waiting_for ? h('div', { class: 'sub run-waiting', title: run.waiting_for }, run.waiting_for) : null,
    ),
    h('td', null, progressBar(run)),
    h('td', { class: 'num' }, num(metrics.reward)),
    h('td', { class: 'num' }, num(metrics.kl)),
    h('td', { title: run.started_at || run.created_at }, since(run.started_at || run.created_at)),
    h('td', { class: 'num' }, duration(runSeconds(run))),
    h(
      'td',
      { class: 'col-actions' },
      runActions(run, { small: true, skip: ['edit'], onDone: () => load({ quiet: true }) }),
    ),
  );
}

function toggleSelected(id, on) {
  if (on) state.selected.add(id);
  else state.selected.delete(id);
  updateCompareButton();
}

function updateCompareButton() {
  const button = $('#compare-button');
  const n = state.selected.size;
  button.disabled = n < 2;
  button.textContent = n ? `Compare selected (${n})` : 'Compare selected';
}

async function startDemo(button) {
  button.disabled = true;
  const label = button.lastChild.textContent;
  button.lastChild.textContent = ' Starting…';
  try {
    const presets = await withToken(listPresets, { purpose: 'reads' });
    const demo = presets.items[0];
    if (!demo) throw new Error('The server offers no preset.');
    const run = await withToken(() => createRun(demo.spec));
    window.location.assign(`/runs/${seg(run.id)}`);
  } catch (error) {
    toast(`Could not start the demo: ${errorText(error)}`, 'error', 8000);
    button.disabled = false;
    button.lastChild.textContent = label;
  }
}

async function describeDemo() {
  try {
    const demo = (await listPresets()).items[0];
    if (demo?.description) $('#demo-description').textContent = demo.description;
  } catch {
    // the static description stays
  }
}

function wire() {
  $('#demo-button').addEventListener('click', (event) => startDemo(event.currentTarget));
  for (const chip of $$('#status-filter .chip')) {
    chip.addEventListener('click', () => {
      state.status = chip.dataset.status;
      state.limit = PAGE;
      for (const c of $$('#status-filter .chip')) c.setAttribute('aria-pressed', String(c === chip));
      writeQuery();
      load();
    });
  }
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  $('#run-search').addEventListener('input', (event) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.q = event.target.value.trim();
      state.limit = PAGE;
      writeQuery();
      load();
    }, 250);
  });
  $('#more-button').addEventListener('click', () => loadMore().catch((e) => toast(errorText(e), 'error')));
  $('#compare-button').addEventListener('click', () => {
    window.location.assign(`/compare?runs=${[...state.selected].map(seg).join(',')}`);
  });
  setInterval(() => {
    if (document.visibilityState !== 'visible') return;
    load({ quiet: true });
    showWorkers($('#workers-list'));
  }, POLL_MS);
}

initShell();
readQuery();
wire();
load();
showWorkers($('#workers-list'));
describeDemo();
