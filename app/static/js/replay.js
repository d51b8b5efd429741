// The group inspector's replay card: a run's stored completions re-scored under other rewards
// (POST /api/runs/{id}/rescore). For the group shown, each completion in sampling order with
// its reward and advantage as trained and as replayed; an advantage that changed sign is
// marked. Hidden while the run has no finished replay; `?replay=ID` picks one.

import { getRescore, getRescores } from './api.js';
import { $, fill, h } from './dom.js';
import { num } from './format.js';
import { errorText, stateBox } from './shell.js';

/** @type {{ runId: string, chosen: number | null, cache: Map<string, Promise<import('./api.js').RescoreDetail>> }} */
const replays = { runId: '', chosen: null, cache: new Map() };

/** Lists the run's finished replays in the card's select; false when there are none. */
export async function initReplays(runId, onChange) {
  replays.runId = runId;
  let items;
  try {
    items = (await getRescores(runId)).items.filter((r) => r.status === 'succeeded');
  } catch {
    return false;
  }
  if (!items.length) return false;
  const asked = Number(new URLSearchParams(window.location.search).get('replay'));
  replays.chosen = items.some((r) => r.id === asked) ? asked : items[items.length - 1].id;
  const select = /** @type {HTMLSelectElement} */ ($('#replay-select'));
  fill(
    select,
    items.map((r) =>
      h('option', { value: String(r.id) }, `#${r.id}: ${r.rewards.map((e) => e.label || e.name).join(', ')}`),
    ),
  );
  select.value = String(replays.chosen);
  select.addEventListener('change', () => {
    replays.chosen = Number(select.value);
    onChange();
  });
  $('#replay-card').hidden = false;
  return true;
}

/** Shows the chosen replay's view of group `index` at `step`. */
export async function showReplay(step, index) {
  if (replays.chosen === null) return;
  const key = `${replays.chosen}:${step}`;
  if (!replays.cache.has(key)) replays.cache.set(key, getRescore(replays.runId, replays.chosen, step));
  const body = $('#replay-body');
  let detail;
  try {
    detail = await replays.cache.get(key);
  } catch (error) {
    replays.cache.delete(key);
    fill(body, stateBox('error', 'Could not load the replay', errorText(error)));
    return;
  }
  const group = detail.groups.find((g) => g.step === step && g.group_index === index);
  if (!group) {
    fill(
      body,
      h(
        'p',
        { class: 'hint replay-none' },
        `Replay #${detail.id} did not re-score this group (its texts were not kept, or step ${step} was not chosen).`,
      ),
    );
    return;
  }
  const flipped = new Set(group.flips.map((f) => f.completion));
  fill(
    body,
    h(
      'p',
      { class: 'hint', id: 'replay-summary' },
      `${group.flips.length} of ${group.completions.length} advantages changed sign`,
    ),
    h(
      'table',
      { class: 'table replay-table', id: 'replay-table' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          ...['#', 'reward trained', 'reward replayed', 'advantage trained', 'advantage replayed', ''].map((t) =>
            h('th', null, t),
          ),
        ),
      ),
      h(
        'tbody',
        null,
        group.completions.map((c, i) =>
          h(
            'tr',
            {
              class: flipped.has(i) ? 'is-flipped' : '',
              dataset: { completion: i, reward: c.reward, advantage: c.advantage },
            },
            h('td', null, String(i)),
            h('td', null, num(c.reward_before)),
            h('td', null, num(c.reward)),
            h('td', null, num(c.advantage_before)),
            h('td', null, num(c.advantage)),
            h('td', null, flipped.has(i) ? 'sign changed' : ''),
          ),
        ),
      ),
    ),
  );
}
