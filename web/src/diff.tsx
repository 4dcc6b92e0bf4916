// A git diff as the views show it: split into files (parseDiff), each a
// folded box with its +/- counts, long files clipped until "show all"
// (FileBox). The Changes view shows a worktree's diff with it, the agent
// view a checkpoint's.
import { useState } from "preact/hooks";
import { visible } from "./format";

export interface FileDiff { name: string; lines: string[]; added: number; removed: number }

/** parseDiff splits a git diff into files, counting added and removed lines. */
export function parseDiff(diff: string): FileDiff[] {
  const files: FileDiff[] = [];
  let cur: FileDiff | null = null;
  for (const line of diff.split("\n")) {
    if (line.startsWith("diff --git ")) {
      const m = / b\/(.*)$/.exec(line);
      cur = { name: m ? m[1] : line.slice(11), lines: [line], added: 0, removed: 0 };
      files.push(cur);
      continue;
    }
    if (!cur) { if (line) { cur = { name: "(diff)", lines: [], added: 0, removed: 0 }; files.push(cur); } else continue; }
    cur.lines.push(line);
    if (line.startsWith("+++ b/")) cur.name = line.slice(6);
    else if (line.startsWith("+") && !line.startsWith("+++")) cur.added++;
    else if (line.startsWith("-") && !line.startsWith("---")) cur.removed++;
  }
  return files;
}

const clipLines = 300; // per file, until "show all"

function lineClass(l: string): string {
  if (l.startsWith("@@")) return "dl hunk";
  if (l.startsWith("+++") || l.startsWith("---") || l.startsWith("diff --git") || l.startsWith("index ")) return "dl head";
  if (l.startsWith("+")) return "dl add";
  if (l.startsWith("-")) return "dl del";
  return "dl";
}

// FileBox shows one file's diff; what an agent wrote (names, lines) with
// its invisible characters shown (visible).
export function FileBox({ f, open, config }: { f: FileDiff; open: boolean; config: boolean }) {
  const [all, setAll] = useState(false);
  // A folded file's lines are not rendered: a large diff folded costs
  // one summary line per file.
  const [shownOpen, setShownOpen] = useState(open);
  const long = f.lines.length > clipLines;
  const shown = all || !long ? f.lines : f.lines.slice(0, clipLines);
  return (
    <details class={config ? "file-diff config" : "file-diff"} data-file={f.name} open={open} onToggle={(e) => setShownOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary><span class="fname">{visible(f.name)}</span> <span class="plus">+{f.added}</span> <span class="minus">−{f.removed}</span>
        {config && <span class="config-flag" title="tool configuration: what agents, engines, git or your editor may do or run"> tool configuration</span>}</summary>
      {shownOpen && <pre class="diff">{shown.map((l, i) => <div key={i} class={lineClass(l)}>{visible(l) || " "}</div>)}</pre>}
      {shownOpen && long && (
        <button type="button" class="link show-all" onClick={() => setAll(!all)}>
          {all ? "show less" : `show all (${f.lines.length} lines)`}
        </button>
      )}
    </details>
  );
}
