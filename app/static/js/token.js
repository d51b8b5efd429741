// The API token: entered once, kept in this browser, sent on every request.

import { $ } from './dom.js';

const KEY = 'grpo.apiToken';

export function getToken() {
  try {
    return localStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(KEY, token);
    else localStorage.removeItem(KEY);
  } catch {
    // private mode without storage: the token lives until the page closes
  }
  renderTokenButton();
}

export function renderTokenButton() {
  const button = $('#token-button');
  if (!button) return;
  const has = Boolean(getToken());
  button.classList.toggle('is-set', has);
  button.title = has ? 'An API token is stored in this browser' : 'Set the API token used for writes';
  $('.token-label', button).textContent = has ? 'Token set' : 'API token';
}

/** Opens the token dialog; resolves true when a token was saved. */
export function askToken(reason = '') {
  const dialog = $('#token-dialog');
  const input = $('#token-input', dialog);
  $('#token-reason', dialog).textContent = reason;
  $('#token-reason', dialog).hidden = !reason;
  input.value = getToken();
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        if (dialog.returnValue === 'save') setToken(input.value.trim());
        if (dialog.returnValue === 'clear') setToken('');
        resolve(dialog.returnValue === 'save' && Boolean(input.value.trim()));
      },
      { once: true },
    );
    dialog.showModal();
    input.focus();
  });
}

/** Runs a request; on 401/403 asks for a token once and retries. `purpose`: what needs it. */
export async function withToken(action, { purpose = 'changes' } = {}) {
  try {
    return await action();
  } catch (error) {
    if (error.status !== 401 && error.status !== 403) throw error;
    const reason =
      error.status === 401
        ? `This server requires an API token for ${purpose}.`
        : 'The stored token was refused. Enter another one.';
    if (await askToken(reason)) return action();
    throw error;
  }
}
