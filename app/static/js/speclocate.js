// Where a field of a spec sits in its YAML or JSON text, so a validation error
// (`rewards.0.weight`) can be shown on its line. JSON is YAML, so one walk serves both.

import { EVENT_ID, parseEvents } from '../vendor/js-yaml.mjs';

/**
 * Map from dotted path ('' for the root) to the offset of its key (or item) in `text`.
 * @param {string} text
 */
export function pathOffsets(text) {
  /** @type {Map<string, number>} */
  const offsets = new Map();
  const stack = [];
  for (const event of parseEvents(text, {})) {
    if (event.type === EVENT_ID.DOCUMENT) continue;
    if (event.type === EVENT_ID.POP) {
      stack.pop();
      continue;
    }
    const top = stack[stack.length - 1];
    const start =
      event.type === EVENT_ID.SCALAR || event.type === EVENT_ID.ALIAS
        ? (event.valueStart ?? event.anchorStart)
        : event.start;
    let path = '';
    if (top && top.kind === 'map' && top.expectKey) {
      top.key = event.type === EVENT_ID.SCALAR ? text.slice(event.valueStart, event.valueEnd) : '?';
      top.keyStart = start;
      top.expectKey = false;
      if (event.type === EVENT_ID.MAPPING || event.type === EVENT_ID.SEQUENCE) stack.push({ kind: 'ignored' });
      continue;
    }
    if (top && top.kind === 'map') {
      path = join(top.path, top.key);
      offsets.set(path, top.keyStart);
      top.expectKey = true;
    } else if (top && top.kind === 'seq') {
      path = join(top.path, top.index);
      offsets.set(path, start);
      top.index += 1;
    } else if (top) {
      path = '?';
    } else {
      offsets.set('', start);
    }
    if (event.type === EVENT_ID.MAPPING) stack.push({ kind: 'map', path, expectKey: true });
    if (event.type === EVENT_ID.SEQUENCE) stack.push({ kind: 'seq', path, index: 0 });
  }
  return offsets;
}

function join(path, key) {
  return path === '' ? String(key) : `${path}.${key}`;
}

/**
 * 1-based line of the deepest part of `loc` present in the text, or null. Path elements the
 * text lacks (a discriminated union's tag, a missing field) are skipped.
 */
/**
 * @param {string} text
 * @param {string} loc
 * @param {Map<string, number> | null} [offsets] pathOffsets(text), when the caller has it
 * @returns {number | null}
 */
export function locateLine(text, loc, offsets = null) {
  let map = offsets;
  try {
    map = map || pathOffsets(text);
  } catch {
    return null;
  }
  let current = '';
  for (const part of String(loc).split('.')) {
    const next = join(current, part);
    if (map.has(next)) current = next;
  }
  if (current === '') return null;
  return lineOf(text, map.get(current));
}

export function lineOf(text, offset) {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i += 1) if (text.charCodeAt(i) === 10) line += 1;
  return line;
}

/** The deepest path whose key starts on a 1-based line, or null. */
export function pathAtLine(text, line) {
  let map;
  try {
    map = pathOffsets(text);
  } catch {
    return null;
  }
  /** @type {string | null} */
  let best = null;
  for (const [path, offset] of map) {
    if (path === '' || lineOf(text, offset) !== line) continue;
    if (!best || path.split('.').length > best.split('.').length) best = path;
  }
  return best;
}
