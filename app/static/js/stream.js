// Server-Sent Events over fetch: resumes with Last-Event-ID after any drop, stops on `end`.
// fetch rather than EventSource so the token header can be sent and the backoff is ours.

import { getToken } from './token.js';

/** @typedef {{ id: string | null, event: string, data: any }} StreamEvent */

const MIN_RETRY_MS = 500;
const MAX_RETRY_MS = 10000;

/**
 * Opens `url` and calls `onEvent({id, event, data})` for each event (data parsed as JSON).
 * `onState(state)` hears 'connecting', 'open', 'reconnecting', 'ended' and 'error'.
 * `lastEventId` starts after that event instead of at the beginning of the run's log.
 * @param {string} url
 * @param {{
 *   onEvent: (event: StreamEvent) => void,
 *   onState?: (state: 'connecting' | 'open' | 'reconnecting' | 'ended' | 'error') => void,
 *   lastEventId?: string | null,
 * }} options
 * @returns {{ close(): void }}
 */
export function openStream(url, { onEvent, onState = () => {}, lastEventId = null }) {
  let lastId = lastEventId;
  let closed = false;
  /** @type {AbortController | null} */
  let controller = null;
  let retry = MIN_RETRY_MS;

  async function connectOnce() {
    controller = new AbortController();
    /** @type {Record<string, string>} */
    const headers = { Accept: 'text/event-stream' };
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (lastId !== null) headers['Last-Event-ID'] = lastId;
    const response = await fetch(url, { headers, signal: controller.signal, cache: 'no-store' });
    if ([401, 403, 404].includes(response.status)) return 'error';
    if (!response.ok || !response.body) return 'retry';
    onState('open');
    retry = MIN_RETRY_MS;
    return readEvents(response.body, (event) => {
      if (event.id !== null) lastId = event.id;
      onEvent(event);
    });
  }

  async function loop() {
    while (!closed) {
      onState(retry === MIN_RETRY_MS ? 'connecting' : 'reconnecting');
      let outcome = 'retry';
      try {
        outcome = await connectOnce();
      } catch {
        if (closed) return;
      }
      if (outcome === 'ended' || outcome === 'error') {
        onState(outcome);
        return;
      }
      if (closed) return;
      onState('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, retry));
      retry = Math.min(retry * 2, MAX_RETRY_MS);
    }
  }

  loop();
  return {
    close() {
      closed = true;
      controller?.abort();
    },
  };
}

/** Parses text/event-stream; resolves 'ended' after an `end` event, 'retry' if the body just stops. */
async function readEvents(body, dispatch) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let event = blank();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return 'retry';
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      if (line === '') {
        if (event.data.length || event.event !== 'message') {
          const out = finish(event);
          dispatch(out);
          if (out.event === 'end') {
            reader.cancel().catch(() => {});
            return 'ended';
          }
        }
        event = blank();
      } else if (!line.startsWith(':')) {
        field(event, line);
      }
    }
  }
}

/** @returns {{ id: string | null, event: string, data: string[] }} */
function blank() {
  return { id: null, event: 'message', data: [] };
}

function field(event, line) {
  const colon = line.indexOf(':');
  const name = colon === -1 ? line : line.slice(0, colon);
  let value = colon === -1 ? '' : line.slice(colon + 1);
  if (value.startsWith(' ')) value = value.slice(1);
  if (name === 'data') event.data.push(value);
  else if (name === 'event') event.event = value;
  else if (name === 'id' && !value.includes('\0')) event.id = value;
}

function finish(event) {
  const text = event.data.join('\n');
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  return { id: event.id, event: event.event, data };
}
