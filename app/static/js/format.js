// Number, time and duration formatting shared by every page.

const DASH = '—';

export function num(value, digits = 3) {
  if (value == null || Number.isNaN(value)) return DASH;
  const abs = Math.abs(value);
  if (abs === 0) return '0';
  if (abs >= 1e5) return value.toExponential(2);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs < 1e-3) return value.toExponential(Math.max(1, digits - 1));
  return String(Number(value.toPrecision(digits)));
}

export function signed(value, digits = 3) {
  if (value == null || Number.isNaN(value)) return DASH;
  return (value > 0 ? '+' : value < 0 ? '−' : '') + num(Math.abs(value), digits);
}

export function pct(value, digits = 1) {
  if (value == null || Number.isNaN(value)) return DASH;
  return `${(value * 100).toFixed(digits)}%`;
}

export function duration(seconds) {
  if (seconds == null || Number.isNaN(seconds) || seconds < 0) return DASH;
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600),
    m = Math.floor((s % 3600) / 60),
    r = s % 60;
  if (h) return `${h}h ${String(m).padStart(2, '0')}m`;
  return `${m}m ${String(r).padStart(2, '0')}s`;
}

export function since(iso, now = Date.now()) {
  if (!iso) return DASH;
  const seconds = (now - Date.parse(iso)) / 1000;
  if (seconds < 45) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString('en-US', { month: 'short', day: 'numeric', year: 'numeric' });
}

export function dateTime(iso) {
  if (!iso) return DASH;
  return new Date(iso).toLocaleString('en-US', {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false,
  });
}

export function clock(iso) {
  if (!iso) return '';
  return new Date(iso).toLocaleTimeString('en-US', { hour12: false });
}

/** Wall time of a run: start to finish, or to now while it runs. */
export function runSeconds(run, now = Date.now()) {
  if (!run.started_at) return null;
  const end = run.finished_at ? Date.parse(run.finished_at) : now;
  return (end - Date.parse(run.started_at)) / 1000;
}
