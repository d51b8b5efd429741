// Group inspector: one prompt's G completions at one step, with the step's other groups
// alongside; ←/→ walk the groups, [ and ] walk the steps, the filter keeps one kind.

import { getGroup, getGroups, getRun } from './api.js';
import { OUTCOME_LABEL } from './bins.js';
import { completionRow, klScale } from './completion.js';
import { $, fill, h, seg } from './dom.js';
import { num } from './format.js';
import { initReplays, showReplay } from './replay.js';
import { errorText, initShell, stateBox } from './shell.js';

const page = $('#page');
const runId = page.dataset.runId;
/**
 * @type {{
 *   run: import('./api.js').RunOut | null, step: number, index: number, filter: string,
 *   groups: import('./api.js').GroupSummary[], listStep: number | null, range: [number, number],
 * }}
 */
const state = {
  run: null,
  step: Number(page.dataset.step),
  index: Number(page.dataset.index),
  filter: '',
  groups: [],
  listStep: null,
  range: [0, 1],
};

function groupPath(step, index) {
  const query = state.filter ? `?filter=${encodeURIComponent(state.filter)}` : '';
  return `/runs/${seg(runId)}/steps/${seg(step)}/groups/${seg(index)}${query}`;
}

/** Moves to (step, index), updating the URL; `push` adds a history entry. */
async function go(step, index, { push = true } = {}) {
  state.step = step;
  state.index = index;
  if (push) window.history.pushState({ step, index }, '', groupPath(step, index));
  document.title = `Group ${index} · step ${step} · GRPO Service`;
  $('#crumb-step').textContent = `Step ${step}`;
  $('#crumb-step').href = `/runs/${seg(runId)}/steps/${seg(step)}`;
  $('#crumb-group').textContent = `Group ${index}`;
  $('#list-title').textContent = `Step ${step}`;
  if (state.listStep !== step) await loadList(step);
  markCurrent();
  await loadGroup(step, index);
}

async function loadList(step) {
  const box = $('#group-items');
  fill(box, stateBox('loading', 'Loading groups…'));
  box.firstChild.classList.add('state-compact');
  try {
    state.groups = (await getGroups(runId, step, state.filter || undefined)).items;
    state.listStep = step;
  } catch (error) {
    state.groups = [];
    fill(box, stateBox('error', 'Could not load groups', errorText(error)));
    return;
  }
  const all = state.groups.flatMap((g) => g.rewards);
  state.range = all.length ? [Math.min(...all), Math.max(...all)] : [0, 1];
  if (!state.groups.length) {
    fill(
      box,
      stateBox(
        'empty',
        'No groups here',
        state.filter
          ? `No ${$('#group-filter').selectedOptions[0].text.toLowerCase()} groups at step ${step}.`
          : `Step ${step} stored no groups.`,
      ),
    );
    return;
  }
  fill(
    box,
    state.groups.map((g) =>
      h(
        'a',
        {
          class: 'group-item',
          href: groupPath(step, g.index),
          dataset: { index: g.index },
          onclick: (event) => {
            event.preventDefault();
            go(step, g.index);
          },
        },
        h('span', { class: 'gi' }, `#${g.index}`),
        h('span', { class: 'gp', title: g.prompt }, g.prompt),
        h(
          'span',
          { class: 'dots', title: g.rewards.map((r) => num(r, 2)).join(' ') },
          g.rewards.map((r) => h('span', { class: 'dot', style: { background: rewardColor(r) } })),
        ),
      ),
    ),
  );
}

function rewardColor(reward) {
  const [lo, hi] = state.range;
  const t = hi > lo ? (reward - lo) / (hi - lo) : reward > 0 ? 1 : 0;
  return `hsl(${Math.round(4 + t * 138)}, 70%, ${t > 0.5 ? 42 : 55}%)`;
}

function markCurrent() {
  for (const item of $('#group-items').querySelectorAll('.group-item')) {
    const current = Number(item.dataset.index) === state.index;
    item.setAttribute('aria-current', String(current));
    if (current) item.scrollIntoView({ block: 'nearest' });
  }
}

async function loadGroup(step, index) {
  try {
    const group = await getGroup(runId, step, index);
    if (state.step !== step || state.index !== index) return;
    renderPrompt(group);
    renderCompletions(group);
    showReplay(step, index);
  } catch (error) {
    if (state.step !== step || state.index !== index) return;
    const title = error.status === 404 ? `No group ${index} at step ${step}` : 'Could not load the group';
    fill(
      $('#prompt-card'),
      stateBox('error', title, error.status === 404 ? 'The run may not have reached this step yet.' : errorText(error)),
    );
    fill($('#completions'));
  }
}

function renderPrompt(g) {
  const outcome = g.outcome;
  fill(
    $('#prompt-card'),
    h(
      'div',
      null,
      h('h3', null, 'Prompt'),
      h('pre', { class: 'prompt-text', id: 'prompt-text' }, g.prompt),
      h('h3', { style: { marginTop: '10px' } }, 'Reference answer'),
      h('pre', { class: 'prompt-text', id: 'answer-text' }, g.answer),
    ),
    h(
      'div',
      { class: 'prompt-side' },
      h(
        'dl',
        { class: 'kv' },
        h('dt', null, 'outcome'),
        h('dd', null, h('span', { class: `outcome outcome-${outcome}` }, OUTCOME_LABEL[outcome] || outcome)),
        ...(g.is_dropped
          ? [
              h('dt', null, 'training'),
              h(
                'dd',
                { id: 'group-dropped', title: 'all rewards equal: no signal, left out by dynamic sampling' },
                'dropped (dynamic sampling)',
              ),
            ]
          : []),
        h('dt', null, 'reward mean'),
        h('dd', { id: 'group-mean' }, num(g.reward_mean)),
        h('dt', null, 'reward std'),
        h('dd', null, num(g.reward_std)),
        h('dt', null, 'completions (G)'),
        h('dd', null, g.rewards.length),
        h('dt', null, 'prompt id'),
        h('dd', null, h('code', null, g.prompt_id)),
      ),
      h(
        'div',
        { class: 'prompt-links' },
        h('a', { class: 'btn btn-ghost', href: `/runs/${seg(runId)}/prompts/${seg(g.prompt_id)}` }, 'Prompt history'),
        h(
          'a',
          { class: 'btn btn-ghost', href: `/runs/${seg(runId)}/steps/${seg(g.step ?? state.step)}` },
          'Step charts',
        ),
      ),
    ),
  );
}

function renderCompletions(g) {
  const functions = (state.run?.spec?.rewards || []).map((r) => r.label || r.name);
  const box = $('#completions');
  if (!g.completions?.length) {
    $('#kl-legend').hidden = true;
    $('#completions-hint').textContent = 'texts were not kept for this group';
    const rows = g.rewards
      .map((reward, i) => ({ reward, advantage: g.advantages[i] }))
      .sort((a, b) => b.reward - a.reward);
    const max = Math.max(1e-9, ...rows.map((r) => Math.abs(r.advantage)));
    fill(
      box,
      h(
        'div',
        { class: 'banner banner-info', style: { margin: '10px 14px' } },
        `The logging policy keeps the texts of the first ${state.run?.spec?.logging?.max_groups_per_step ?? 'few'} groups of each step (logging.max_groups_per_step); this group's rewards and advantages are all kept.`,
      ),
      rows.map((r, i) => completionRow(r, i + 1, { maxAdvantage: max, bare: true })),
    );
    box.classList.add('is-summary');
    return;
  }
  box.classList.remove('is-summary');
  const completions = [...g.completions].sort((a, b) => b.reward - a.reward);
  const maxAdvantage = Math.max(1e-9, ...completions.map((c) => Math.abs(c.advantage)));
  const klMax = klScale(completions);
  $('#kl-legend').hidden = !klMax;
  $('#kl-max').textContent = klMax ? `0 … ${num(klMax)}` : '';
  $('#completions-hint').textContent = `${completions.length} completions, sorted by reward, best first`;
  const names = functions.length ? functions : Object.keys(completions[0].rewards || {});
  fill(
    box,
    completions.map((c, i) => completionRow(c, i + 1, { maxAdvantage, klMax, functions: names, step: versionStep(g) })),
  );
}

/** The group's step where its completions' policy versions are worth showing: runs that may sample stale. */
function versionStep(g) {
  const spec = state.run?.spec;
  return spec?.async_generation || (spec?.weight_sync_steps ?? 1) > 1 ? g.step : null;
}

function neighbour(delta) {
  const at = state.groups.findIndex((g) => g.index === state.index);
  const next = state.groups[at + delta];
  if (next) go(state.step, next.index);
}

async function stepBy(delta) {
  const last = state.run ? state.run.step : state.step;
  const step = state.step + delta;
  if (step < 1 || step > last) return;
  await loadList(step);
  const same = state.groups.find((g) => g.index === state.index) || state.groups[0];
  await go(step, same ? same.index : state.index);
}

function wire() {
  document.addEventListener('keydown', (event) => {
    const target = /** @type {HTMLElement} */ (event.target);
    if (target.closest('input, textarea, select') || event.metaKey || event.ctrlKey || event.altKey) return;
    const actions = {
      ArrowLeft: () => neighbour(-1),
      ArrowRight: () => neighbour(1),
      '[': () => stepBy(-1),
      ']': () => stepBy(1),
    };
    if (actions[event.key]) {
      event.preventDefault();
      actions[event.key]();
    }
  });
  $('#prev-step').addEventListener('click', () => stepBy(-1));
  $('#next-step').addEventListener('click', () => stepBy(1));
  $('#group-filter').addEventListener('change', async (event) => {
    state.filter = event.target.value;
    state.listStep = null;
    await loadList(state.step);
    const keep = state.groups.find((g) => g.index === state.index) || state.groups[0];
    if (keep) await go(state.step, keep.index, { push: false });
    window.history.replaceState(null, '', groupPath(state.step, state.index));
  });
  window.addEventListener('popstate', () => {
    const match = window.location.pathname.match(/\/steps\/(\d+)\/groups\/(\d+)$/);
    if (match) go(Number(match[1]), Number(match[2]), { push: false });
  });
}

async function main() {
  initShell();
  state.filter = new URLSearchParams(window.location.search).get('filter') || '';
  $('#group-filter').value = state.filter;
  wire();
  try {
    const run = await getRun(runId);
    state.run = run;
    $('#crumb-run').textContent = run.name;
  } catch (error) {
    fill(
      $('#prompt-card'),
      stateBox('error', error.status === 404 ? 'Run not found' : 'Could not load the run', errorText(error)),
    );
    return;
  }
  await initReplays(runId, () => showReplay(state.step, state.index));
  await go(state.step, state.index, { push: false });
}

main();
