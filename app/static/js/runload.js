// Starts reading a run page's data the moment the page head is parsed, while the chart
// library is still loading. Loaded as an async module in <head>; run.js imports the same
// instance and takes over the requests already in flight.

import { getBinEdges, getLogs, getMetrics, getRun } from './api.js';

export const runId = /** @type {HTMLMetaElement} */ (document.querySelector('meta[name="grpo-run-id"]')).content;
export const run = getRun(runId);
// a long run's history comes thinned to what the charts show (GET /metrics max_points)
export const history = getMetrics(runId).catch(() => Object.assign([], { lastEventId: null, thinned: null }));
// read after the history, whose end the stream starts from: a line written between the two
// reads would otherwise be in neither (a line in both is shown once)
export const logLines = history
  .then(() => getLogs(runId))
  .then((r) => r.items)
  .catch(() => []);
export const binEdges = getBinEdges(runId);
// a 404 is shown by run.js; an unawaited rejection here would only add console noise
run.catch(() => {});
binEdges.catch(() => {});
