// Runs page: the live workers, each with the devices it holds (one rank of a run per device).

import { listWorkers } from './api.js';
import { fill, h, seg } from './dom.js';
import { since } from './format.js';

/** @param {import('./api.js').WorkerOut} worker */
export function devicesText(worker) {
  const n = worker.devices.length;
  if (worker.device_kind === 'cuda') return `${n} GPU${n === 1 ? '' : 's'} (${worker.devices.join(', ')})`;
  return `${n} CPU slot${n === 1 ? '' : 's'}`;
}

/** @param {import('./api.js').WorkerOut} worker */
function item(worker) {
  return h(
    'li',
    { class: 'worker', dataset: { worker: worker.name } },
    h('b', null, worker.name),
    h('span', { class: 'worker-devices', title: worker.device }, devicesText(worker)),
    h('span', { class: 'muted' }, `queues ${worker.queues.join(', ')}`),
    worker.address
      ? h(
          'span',
          { class: 'worker-address', title: 'GRPO_WORKER_ADDRESS: it takes nodes of runs on several machines' },
          `at ${worker.address}`,
        )
      : null,
    worker.role === 'generation' ? h('span', { class: 'worker-role' }, 'generation') : null,
    activity(worker),
    h('span', { class: 'muted', title: worker.last_seen_at }, `seen ${since(worker.last_seen_at)}`),
  );
}

/** What the worker does now: the run it trains, or (a generation worker) the vLLM server
 * it runs for a run, with its model and URL.
 * @param {import('./api.js').WorkerOut} worker */
function activity(worker) {
  const serving = worker.serving;
  if (serving) {
    return h(
      'span',
      { class: 'worker-serving' },
      h('a', { href: `/runs/${seg(serving.run_id)}` }, `serving ${serving.run_id.slice(0, 8)}`),
      ` ${serving.model} at ${serving.url}`,
    );
  }
  return worker.run_id
    ? h('a', { href: `/runs/${seg(worker.run_id)}` }, `running ${worker.run_id.slice(0, 8)}`)
    : h('span', { class: 'muted' }, 'idle');
}

/** Fill `el` with the live workers; quiet on errors (the runs table says what is wrong). */
export async function showWorkers(el) {
  try {
    const { items } = await listWorkers();
    fill(
      el,
      items.length
        ? h('ul', { class: 'worker-list' }, items.map(item))
        : h('p', { class: 'muted' }, 'No live worker: queued runs wait for one (grpo worker).'),
    );
  } catch {
    // keep the last list
  }
}
