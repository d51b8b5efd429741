// `?set=<field>=<JSON value>` on the new-run page: a copied spec with fields changed, as the
// run doctor's "clone with this change" links it (doctor.js). `field` is a dotted path.

/**
 * The `set` parameters as [field, value] pairs; a value that is not JSON is taken as text.
 * @param {URLSearchParams} params
 * @returns {[string, unknown][]}
 */
export function specChanges(params) {
  return params.getAll('set').flatMap((item) => {
    const at = item.indexOf('=');
    if (at <= 0) return [];
    const text = item.slice(at + 1);
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      value = text;
    }
    return [[item.slice(0, at), value]];
  });
}

/**
 * A copy of `spec` with each change applied (sections on the way are created).
 * @param {Record<string, any>} spec
 * @param {[string, unknown][]} changes
 */
export function withChanges(spec, changes) {
  const out = structuredClone(spec);
  for (const [field, value] of changes) {
    const path = field.split('.');
    let at = out;
    for (const key of path.slice(0, -1)) {
      if (at[key] === null || typeof at[key] !== 'object' || Array.isArray(at[key])) at[key] = {};
      at = at[key];
    }
    at[path[path.length - 1]] = value;
  }
  return out;
}

/** `learning_rate: 3e-05, beta: 0.08` */
export function describeChanges(changes) {
  return changes.map(([field, value]) => `${field}: ${JSON.stringify(value)}`).join(', ');
}
