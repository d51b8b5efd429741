// The public REST API, one function per endpoint. The dashboard reads nothing else.

import { seg } from './dom.js';
import { MAX_POINTS } from './sampling.js';
import { getToken } from './token.js';

/**
 * Shapes of the API's bodies, generated from its OpenAPI document (openapi.d.ts).
 * @typedef {import('./openapi').RunOut} RunOut
 * @typedef {import('./openapi').RunList} RunList
 * @typedef {import('./openapi').JobSpec} JobSpec
 * @typedef {import('./openapi').PresetList} PresetList
 * @typedef {import('./openapi').PreflightReport} PreflightReport
 * @typedef {import('./openapi').TrlConversionOut} TrlConversionOut
 * @typedef {import('./openapi').TrlConfigIn} TrlConfigIn
 * @typedef {import('./openapi').WorkerList} WorkerList
 * @typedef {import('./openapi').WorkerOut} WorkerOut
 * @typedef {import('./openapi').LogList} LogList
 * @typedef {import('./openapi').GroupList} GroupList
 * @typedef {import('./openapi').GroupSummary} GroupSummary
 * @typedef {import('./openapi').GroupDetail} GroupDetail
 * @typedef {import('./openapi').MetricRow} MetricRow
 * @typedef {import('./openapi').MetricList} MetricList
 * @typedef {import('./openapi').Thinning} Thinning
 * @typedef {import('./openapi').EvalList} EvalList
 * @typedef {import('./openapi').HistogramRow} HistogramRow
 * @typedef {import('./openapi').HistogramList['bin_edges']} BinEdges
 * @typedef {import('./openapi').DiagnosisOut} DiagnosisOut
 * @typedef {import('./openapi').FindingOut} FindingOut
 * @typedef {import('./openapi').DatasetOut} DatasetOut
 * @typedef {import('./openapi').RescoreList} RescoreList
 * @typedef {import('./openapi').RescoreDetail} RescoreDetail
 * @typedef {{ loc: string, message: string }} FieldError
 * @typedef {{ params?: Record<string, unknown>, body?: unknown }} RequestOptions
 */

export class ApiError extends Error {
  /**
   * @param {number} status 0 when the server could not be reached
   * @param {any} body the error body, `{error: {code, message, fields}}`
   */
  constructor(status, body) {
    const error = body?.error ? body.error : {};
    super(error.message || (status ? `HTTP ${status}` : 'The server cannot be reached.'));
    this.status = status;
    this.code = error.code || (status ? 'http_error' : 'network_error');
    /** @type {FieldError[]} */
    this.fields = error.fields || [];
  }
}

/** @param {string} accept */
function authHeaders(accept) {
  /** @type {Record<string, string>} */
  const headers = { Accept: accept };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

/**
 * @param {string} method
 * @param {string} path
 * @param {RequestOptions} [options]
 * @returns {Promise<any>} the JSON body; the exported functions below give it its type
 */
async function request(method, path, { params, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, String(value));
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

/**
 * Upload a JSONL file as it is (its newlines kept) to POST /api/datasets.
 * @param {Blob} file
 * @param {Record<string, string>} params name, prompt_field, answer_field
 * @returns {Promise<DatasetOut>}
 */
export async function uploadDataset(file, params) {
  const url = new URL('/api/datasets', window.location.origin);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  const headers = { ...authHeaders('application/json'), 'Content-Type': 'application/x-ndjson' };
  let response;
  try {
    response = await fetch(url, { method: 'POST', headers, body: file });
  } catch {
    throw new ApiError(0, null);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

const run = (id) => `/api/runs/${seg(id)}`;

/** @type {(params?: Record<string, unknown>) => Promise<RunList>} */
export const listRuns = (params) => request('GET', '/api/runs', { params });
/** @type {(id: string) => Promise<RunOut>} */
export const getRun = (id) => request('GET', run(id));
/** @type {(spec: unknown) => Promise<RunOut>} */
export const createRun = (spec) => request('POST', '/api/runs', { body: spec });
/** @type {(id: string) => Promise<RunOut>} */
export const cancelRun = (id) => request('POST', `${run(id)}/cancel`);
/** @type {(id: string) => Promise<import('./openapi').ResumedRun>} */
export const resumeRun = (id) => request('POST', `${run(id)}/resume`);
/** @type {(id: string, patch?: Record<string, unknown> | null) => Promise<RunOut>} */
export const cloneRun = (id, patch) => request('POST', `${run(id)}/clone`, { body: patch ? { patch } : {} });
/** @type {(id: string) => Promise<null>} */
export const deleteRun = (id) => request('DELETE', run(id));
/** @type {() => Promise<PresetList>} */
export const listPresets = () => request('GET', '/api/presets');
/** Every problem POST /api/runs would refuse a spec for, each naming its field; stores nothing. */
/** @type {(spec: unknown) => Promise<import('./openapi').SpecCheckOut>} */
export const checkSpec = (spec) => request('POST', '/api/specs/check', { body: spec });
/** A TRL GRPOConfig (or AsyncGRPOConfig: `configClass`; null: by its fields) YAML as a
 * spec, with the fields it could not map. */
/** @type {(config: string, configClass: TrlConfigIn['config_class']) => Promise<TrlConversionOut>} */
export const convertTrlConfig = (config, configClass) =>
  request('POST', '/api/specs/convert', { body: { config, config_class: configClass } });

/** @returns {Promise<PreflightReport>} */
export const preflightRewards = (body) => request('POST', '/api/rewards/preflight', { body });
/** @type {() => Promise<WorkerList>} */
export const listWorkers = () => request('GET', '/api/workers');
/**
 * A run's histogram bin edges by histogram name (counts[i] is [edges[i], edges[i+1])), read
 * with the smallest page of its histograms.
 * @type {(id: string) => Promise<BinEdges>}
 */
export const getBinEdges = (id) =>
  request('GET', `${run(id)}/histograms`, { params: { limit: 1 } }).then((page) => page.bin_edges);
/** @type {(id: string) => Promise<LogList>} */
export const getLogs = (id) => request('GET', `${run(id)}/logs`);
/** @type {(id: string, step: number, filter?: string) => Promise<GroupList>} */
export const getGroups = (id, step, filter) =>
  request('GET', `${run(id)}/steps/${seg(step)}/groups`, { params: { filter } });
/** @type {(id: string, step: number, index: number) => Promise<GroupDetail>} */
export const getGroup = (id, step, index) => request('GET', `${run(id)}/steps/${seg(step)}/groups/${seg(index)}`);
/** The run's replays under other rewards (POST .../rescore), oldest first.
 * @type {(id: string) => Promise<RescoreList>} */
export const getRescores = (id) => request('GET', `${run(id)}/rescores`);
/** @type {(id: string, rescoreId: number, step: number) => Promise<RescoreDetail>} */
export const getRescore = (id, rescoreId, step) =>
  request('GET', `${run(id)}/rescores/${seg(rescoreId)}`, { params: { step } });
/** @type {(id: string, promptId: string) => Promise<GroupList>} */
export const getPromptHistory = (id, promptId) => request('GET', `${run(id)}/prompts/${seg(promptId)}`);
/** @type {(id: string, params?: { examples?: boolean, step?: number }) => Promise<EvalList>} */
export const getEvals = (id, params = {}) => request('GET', `${run(id)}/evals`, { params });
/** The run doctor's findings (a run stored before is diagnosed when read: `is_current` is
 * false while a long one is still being caught up with, after the answer). */
/** @type {(id: string) => Promise<DiagnosisOut>} */
export const getDiagnostics = (id) => request('GET', `${run(id)}/diagnostics`);
/** @type {(id: string) => string} */
export const eventsUrl = (id) => `${run(id)}/events`;
/** @type {(id: string, query: string) => string} */
export const exportUrl = (id, query) => `${run(id)}/export?${query}`;
/** A checkpoint's model as .tar.gz; `which`: a step or 'latest'. */
export const checkpointUrl = (id, which) => `${run(id)}/checkpoints/${which}/download`;

const HISTOGRAMS_PAGE = 20000;

/**
 * Every row of a per-step resource (histograms) after `afterStep` (none: all), following
 * pages until a short one. `lastEventId` is the stream position the server says the rows
 * cover, when it says so (resume from there).
 */
/**
 * @template {{ step: number }} Row
 * @param {string} path
 * @param {{ afterStep?: number, params?: Record<string, unknown> }} [options]
 * @returns {Promise<Row[] & { lastEventId: string | null }>}
 */
async function getAllSteps(path, { afterStep, params = {} } = {}) {
  /** @type {Row[]} */
  const rows = [];
  /** @type {string | null} */
  let lastEventId = null;
  for (;;) {
    const page = await request('GET', path, { params: { ...params, after_step: afterStep, limit: HISTOGRAMS_PAGE } });
    if (lastEventId === null && page.last_event_id != null) lastEventId = String(page.last_event_id);
    rows.push(...page.items);
    if (page.items.length < HISTOGRAMS_PAGE) return Object.assign(rows, { lastEventId });
    afterStep = page.items[page.items.length - 1].step;
  }
}

/**
 * A run's step metrics in (afterStep, beforeStep) as a chart shows them, in one answer:
 * every step of a range of up to `maxPoints` steps, a thinned view of a longer one (stored
 * steps only: the first and the last, every row of a sparse metric, and each bucket's lowest
 * and highest row of every other metric; `thinned` says how many steps it stands for).
 * `lastEventId` is the stream position the rows cover (resume from there).
 * @type {(id: string, options?: { afterStep?: number, beforeStep?: number, maxPoints?: number, keys?: string[] }) =>
 *   Promise<MetricRow[] & { lastEventId: string | null, thinned: Thinning | null }>}
 */
export const getMetrics = async (id, { afterStep, beforeStep, maxPoints = MAX_POINTS, keys } = {}) => {
  /** @type {MetricList} */
  const page = await request('GET', `${run(id)}/metrics`, {
    params: { after_step: afterStep, before_step: beforeStep, max_points: maxPoints, keys: keys?.join(',') },
  });
  const lastEventId = page.last_event_id != null ? String(page.last_event_id) : null;
  return Object.assign(page.items, { lastEventId, thinned: page.thinned ?? null });
};

/**
 * Every step's histograms (advantage, reward, group reward spread).
 * @type {(id: string, options?: { afterStep?: number }) => Promise<HistogramRow[] & { lastEventId: string | null }>}
 */
export const getAllHistograms = (id, { afterStep } = {}) => getAllSteps(`${run(id)}/histograms`, { afterStep });
