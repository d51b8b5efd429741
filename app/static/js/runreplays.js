// The run page's replays panel: the run's replays under other rewards (POST .../rescore),
// each with its reward and advantage distributions before and after and how many groups
// saw an advantage change sign; a link opens the group inspector on the replay. Hidden
// while the run has none.

import { getRescores } from './api.js';
import { $, fill, h, seg } from './dom.js';
import { num } from './format.js';

/** @param {{ mean: number | null, std: number | null } | undefined} before */
function change(before, after, key) {
  return `${num(before?.[key] ?? null)} → ${num(after?.[key] ?? null)}`;
}

/** @param {import('./api.js').RescoreList['items'][number]} replay */
function replayRow(runId, replay) {
  const s = replay.summary || {};
  const labels = replay.rewards.map((e) => e.label || e.name).join(', ');
  const steps = replay.steps.length > 4 ? `${replay.steps.length} steps` : `step ${replay.steps.join(', ')}`;
  const done = replay.status === 'succeeded';
  return h(
    'tr',
    { dataset: { replay: replay.id } },
    h('td', null, `#${replay.id}`),
    h('td', null, labels),
    h('td', null, steps),
    h('td', { title: replay.error || '' }, replay.status),
    h('td', null, done ? `${s.flipped_groups} of ${s.groups}` : ''),
    h('td', null, done ? change(s.reward_before, s.reward, 'mean') : ''),
    h('td', null, done ? change(s.reward_before, s.reward, 'std') : ''),
    h('td', null, done ? change(s.advantage_before, s.advantage, 'std') : ''),
    h(
      'td',
      null,
      done
        ? h('a', { href: `/runs/${seg(runId)}/steps/${seg(replay.steps[0])}/groups/0?replay=${replay.id}` }, 'Inspect')
        : '',
    ),
  );
}

/** Fills the panel with the run's replays, or leaves it hidden when there are none. */
export async function showRunReplays(runId) {
  let items;
  try {
    items = (await getRescores(runId)).items;
  } catch {
    return;
  }
  if (!items.length) return;
  const head = ['', 'rewards', 'steps', 'status', 'groups flipped', 'reward mean', 'reward std', 'advantage std', ''];
  fill(
    $('#replays-table'),
    h(
      'table',
      { class: 'table' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          head.map((t) => h('th', null, t)),
        ),
      ),
      h(
        'tbody',
        null,
        items.map((r) => replayRow(runId, r)),
      ),
    ),
  );
  $('#replays-panel').hidden = false;
}
