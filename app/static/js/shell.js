// What every page shares: the token button in the top bar and transient notices.

import { $, h } from './dom.js';
import { askToken, renderTokenButton } from './token.js';

export function initShell() {
  renderTokenButton();
  $('#token-button')?.addEventListener('click', () => askToken());
}

/** A short notice in the corner; kind is 'info', 'ok' or 'error'. */
export function toast(message, kind = 'info', ms = 4000) {
  const box = $('#toasts');
  if (!box) return;
  const item = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, message);
  box.append(item);
  setTimeout(() => item.classList.add('is-leaving'), ms);
  setTimeout(() => item.remove(), ms + 400);
}

/** A designed empty, loading or error state in place of content. */
export function stateBox(kind, title, detail = '', action = null) {
  return h(
    'div',
    { class: `state state-${kind}` },
    h('div', { class: 'state-icon', 'aria-hidden': 'true' }),
    h('div', { class: 'state-title' }, title),
    detail ? h('div', { class: 'state-detail' }, detail) : null,
    action,
  );
}

export function errorText(error) {
  if (!error) return 'Unknown error';
  if (error.code === 'network_error') return 'The server cannot be reached. Is the service running?';
  return error.message || String(error);
}
