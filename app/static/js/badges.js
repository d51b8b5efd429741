// Status pills and progress bars, the same on every page.

import { h } from './dom.js';

/** @typedef {import('./openapi').RunStatus} RunStatus */

// every status the API can send is placed here, or tsc names the one that is missing
/** @type {Record<RunStatus, boolean>} */
const IS_FINAL = { queued: false, running: false, succeeded: true, failed: true, cancelled: true };
export const ACTIVE = new Set(Object.entries(IS_FINAL).flatMap(([status, isFinal]) => (isFinal ? [] : [status])));
export const FINAL = new Set(Object.entries(IS_FINAL).flatMap(([status, isFinal]) => (isFinal ? [status] : [])));

/** `run.is_cancel_requested` shows an active run as "cancelling" until its worker stops it. */
export function statusPill(status, { cancelling = false } = {}) {
  const label = cancelling && ACTIVE.has(status) ? 'cancelling' : status;
  return h(
    'span',
    { class: `pill pill-${label === 'cancelling' ? 'cancelled' : status}`, dataset: { status } },
    h('span', { class: 'pill-dot', 'aria-hidden': 'true' }),
    label,
  );
}

export function progressBar(run) {
  const total = run.total_steps || 0;
  const share = total ? Math.min(1, run.step / total) : 0;
  return h(
    'div',
    { class: `progress progress-${run.status}`, title: `step ${run.step} of ${total}` },
    h('div', { class: 'progress-track' }, h('div', { class: 'progress-fill', style: { width: `${share * 100}%` } })),
    h('span', { class: 'progress-label' }, `${run.step}/${total}`),
  );
}
