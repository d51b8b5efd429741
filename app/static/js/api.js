// The public REST API, one function per endpoint. The dashboard reads nothing else.

import { seg } from './dom.js';
import { getToken } from './token.js';

export class ApiError extends Error {
  constructor(status, body) {
    const error = body?.error ? body.error : {};
    super(error.message || (status ? `HTTP ${status}` : 'The server cannot be reached.'));
    this.status = status;
    this.code = error.code || (status ? 'http_error' : 'network_error');
    this.fields = error.fields || [];
  }
}

function authHeaders(accept) {
  const headers = { Accept: accept };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

async function request(method, path, { params, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, value);
  }
  const headers = authHeaders('application/json');
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, null);
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

/**
 * A download read with the same token as every other request (a plain link would send none):
 * resolves {blob, filename}, the name from Content-Disposition.
 */
export async function fetchFile(url) {
  let response;
  try {
    response = await fetch(url, { headers: authHeaders('*/*') });
  } catch {
    throw new ApiError(0, null);
  }
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const disposition = response.headers.get('Content-Disposition') || '';
  const filename = /filename="?([^";]+)"?/.exec(disposition)?.[1] || url.split('/').pop().split('?')[0];
  return { blob: await response.blob(), filename };
}

const run = (id) => `/api/runs/${seg(id)}`;

export const listRuns = (params) => request('GET', '/api/runs', { params });
export const getRun = (id) => request('GET', run(id));
export const createRun = (spec) => request('POST', '/api/runs', { body: spec });
export const cancelRun = (id) => request('POST', `${run(id)}/cancel`);
export const resumeRun = (id) => request('POST', `${run(id)}/resume`);
export const cloneRun = (id, patch) => request('POST', `${run(id)}/clone`, { body: patch ? { patch } : {} });
export const deleteRun = (id) => request('DELETE', run(id));
export const listPresets = () => request('GET', '/api/presets');
export const getLogs = (id) => request('GET', `${run(id)}/logs`);
export const getGroups = (id, step, filter) =>
  request('GET', `${run(id)}/steps/${seg(step)}/groups`, { params: { filter } });
export const getGroup = (id, step, index) => request('GET', `${run(id)}/steps/${seg(step)}/groups/${seg(index)}`);
export const getPromptHistory = (id, promptId) => request('GET', `${run(id)}/prompts/${seg(promptId)}`);
export const eventsUrl = (id) => `${run(id)}/events`;
export const exportUrl = (id, query) => `${run(id)}/export?${query}`;

const METRICS_PAGE = 20000;

/**
 * Every row of a per-step resource (metrics, histograms) after `afterStep`, following pages
 * until a short one. `lastEventId` is the stream position the server says the rows cover,
 * when it says so (resume from there).
 */
async function getAllSteps(path, { afterStep = 0, params = {} } = {}) {
  const rows = [];
  let lastEventId = null;
  for (;;) {
    const page = await request('GET', path, { params: { ...params, after_step: afterStep, limit: METRICS_PAGE } });
    if (lastEventId === null && page.last_event_id != null) lastEventId = String(page.last_event_id);
    rows.push(...page.items);
    if (page.items.length < METRICS_PAGE) return Object.assign(rows, { lastEventId });
    afterStep = page.items[page.items.length - 1].step;
  }
}

export const getAllMetrics = (id, { afterStep = 0, keys } = {}) =>
  getAllSteps(`${run(id)}/metrics`, { afterStep, params: { keys: keys?.join(',') } });

/** Every step's histograms (advantage, reward, group reward spread). */
export const getAllHistograms = (id, { afterStep = 0 } = {}) => getAllSteps(`${run(id)}/histograms`, { afterStep });
