// Small formatting helpers of the views.

export function ago(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function clock(iso: string): string {
  const d = new Date(iso);
  return isNaN(d.getTime()) ? "" : d.toLocaleTimeString();
}

/** when is a date and time in the person's locale ("" for none). */
export function when(iso: string): string {
  const d = new Date(iso);
  return isNaN(d.getTime()) ? "" : d.toLocaleString();
}

export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)}m ${Math.round(s % 60)}s`;
}

export function prettyJSON(s: string): string {
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return s; }
}

// Characters that change how the text around them reads without showing
// themselves: Unicode's format characters (bidi controls such as U+202E,
// zero-width ones such as U+200B, U+FEFF, invisible tags) and the line and
// paragraph separators.
const invisible = /[\p{Cf}\u2028\u2029]/gu;

// visible shows each invisible character of what an agent, a task or a
// file wrote as the text \u{XXXX}, as the CLI does on a terminal, so a
// reversed file name or a hidden word cannot pass for what it is not.
export function visible(s: string): string {
  return s.replace(invisible, (c) => `\\u{${c.codePointAt(0)!.toString(16).padStart(4, "0")}}`);
}
