// Checkpoints of an agent's workspace (C18) as the agent view shows them:
// each turn's on its card (matched by turn id), the others (a reset's, a
// rewind's, a turn's whose card is not shown) in a list of their own,
// newest first. No DOM here: what is worked out from the wire is tested on
// its own, in the browser (cmd/troupe TestBrowserCheckpoints).
import type { Checkpoint, CheckpointsResponse, RewindResponse } from "./api";
export type { CheckpointsResponse, RewindResponse };

/** CheckpointDiff is what the UI reads of GET …/checkpoints/{seq}/diff
 * (?stat=1: git's --stat), an api.DiffResponse. */
export interface CheckpointDiff { diff: string; cut: boolean; tree: string }

/** byTurn maps each turn id to its checkpoint (reason "turn"); were a
 * turn to have two, the newest. */
export function byTurn(list: Checkpoint[]): Map<string, Checkpoint> {
  const out = new Map<string, Checkpoint>();
  for (const c of list) {
    if (c.reason !== "turn" || !c.turn) continue;
    const had = out.get(c.turn);
    if (!had || had.seq < c.seq) out.set(c.turn, c);
  }
  return out;
}

/** unshown lists, newest first, the checkpoints no turn card shows: those
 * of no turn (a reset's, a rewind's …) and those of turns not in shown
 * (older than the turns loaded), so that every checkpoint can be reached. */
export function unshown(list: Checkpoint[], shown: Iterable<string>): Checkpoint[] {
  const cards = byTurn(list);
  const have = new Set(shown);
  return list.filter((c) => !(c.turn && have.has(c.turn) && cards.get(c.turn) === c)).sort((a, b) => b.seq - a.seq);
}

/** changeLine says what a checkpoint changed: "2 files changed +10 −1". */
export function changeLine(c: Checkpoint): string {
  if (!c.files) return "no files changed";
  return `${c.files} file${c.files === 1 ? "" : "s"} changed +${c.added} −${c.deleted}`;
}

/** skippedLine names the files a checkpoint left out (too large), "" when none. */
export function skippedLine(c: Checkpoint): string {
  if (!c.skipped) return "";
  const names = c.skipped_names || [];
  const more = c.skipped - names.length;
  return `${c.skipped} file${c.skipped === 1 ? "" : "s"} too large, not kept: ${names.join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
}

/** reasonLine says when a checkpoint was made: at a turn's end, or before what. */
export function reasonLine(c: Checkpoint): string {
  if (c.reason === "turn") return c.turn ? `end of turn ${c.turn}` : "end of a turn";
  return `before ${c.reason}`;
}

/** rewoundLine is what the person reads after a rewind. */
export function rewoundLine(r: RewindResponse): string {
  return `Rewound to checkpoint ${r.seq}; checkpoint ${r.before.seq} holds the files as they were: rewind to ${r.before.seq} to undo`;
}
