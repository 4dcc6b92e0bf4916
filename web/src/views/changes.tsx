// Changes: the worktrees of the project's agents with workspace =
// "worktree" (GET /worktrees), one agent's diff against its base (GET
// …/diff) shown file by file (folded, +/- counts, long files clipped with
// "show all"; tool configuration first, flagged and open), and Merge (POST
// …/merge) with the daemon's refusal shown as it says it (conflicting
// files, a dirty project tree). A diff that changes tool configuration, or
// is cut, asks before merging, listing the files; only then are they sent
// (include_config, force). Merge names the work shown (tree): changed
// since, it is refused.
import { useEffect, useState } from "preact/hooks";
import { registerView } from "../router";
import { app, navigate, useApp } from "../store";
import { agentPath, call, projectPath } from "../api";
import { FileBox, parseDiff } from "../diff";

interface Worktree {
  agent: string; path: string; branch: string; base: string; base_commit?: string; fork_point?: string; exists: boolean;
  orphan?: boolean; dirty?: boolean; changed?: number; ahead?: number; behind?: number; error?: string;
}
/** Outlook: where the branch stands against its base, and what a merge of the work shown would do. */
interface Outlook {
  base: string; base_commit: string; fork_point: string; ahead: number; behind: number; into?: string;
  brings?: string[]; brings_count: number; conflicts?: string[]; merged?: boolean; unknown?: string;
}
interface WorktreeList { worktrees: Worktree[]; cut?: number }
interface MergeResult { committed: boolean; merged: boolean; branch: string; into: string; commit?: string; config?: string[] }
interface DiffResponse { diff: string; config: string[]; cut: boolean; tree: string; outlook: Outlook }
const short = (c?: string) => (c || "").slice(0, 8);

// OutlookLine says what the diff is against and what a merge would do now.
function OutlookLine({ branch, o }: { branch: string; o: Outlook }) {
  const moved = o.behind ? `; ${o.base} has moved ${o.behind} commit(s) since (now ${short(o.base_commit)})` : "";
  let merge = "";
  if (o.unknown) merge = `a merge cannot be foreseen: ${o.unknown}`;
  else if (o.merged) merge = `${o.into || "the checkout"} has this work already: a merge brings nothing`;
  else if (o.conflicts?.length) merge = `merging into ${o.into} would conflict in ${o.conflicts.join(", ")}: resolve it in the worktree first`;
  else merge = `merging into ${o.into} brings ${o.brings_count} file(s)${o.brings?.length ? `: ${o.brings.slice(0, 10).join(", ")}${o.brings_count > 10 ? ", …" : ""}` : ""}`;
  return (
    <p class="note" id="diff-outlook">
      {branch} against <code>{short(o.fork_point)}</code>, where it forked from {o.base}
      {` · ${o.ahead} commit(s) ahead, ${o.behind} behind`}{moved}.{" "}
      <span id="diff-merge-outlook" class={o.conflicts?.length ? "err" : ""}>{merge}.</span>
    </p>
  );
}

function ChangesView({ arg }: { arg: string }) {
  useApp();
  const project = app.route.project;
  const [list, setList] = useState<WorktreeList | null>(null);
  const [diff, setDiff] = useState<{ agent: string; text: string; config: string[]; cut: boolean; tree: string; outlook: Outlook } | null>(null);
  const [err, setErr] = useState("");
  const [merge, setMerge] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(false);

  async function loadList() {
    try { setList(await call<WorktreeList>("GET", `${projectPath(project)}/worktrees`)); setErr(""); } catch (e) { setErr((e as Error).message); }
  }
  async function loadDiff(agent: string) {
    try {
      const d = await call<DiffResponse>("GET", `${agentPath(project, agent)}/diff`);
      setDiff({ agent, text: d.diff, config: d.config || [], cut: d.cut, tree: d.tree, outlook: d.outlook }); setErr("");
    } catch (e) { setDiff(null); setErr((e as Error).message); }
  }
  useEffect(() => { setList(null); loadList(); }, [project]);
  useEffect(() => { setMerge(null); setDiff(null); setConfirming(false); if (arg) loadDiff(arg); }, [project, arg]);

  // confirmed: the person saw the tool configuration and the cut listed
  // and agreed; only then are they sent.
  async function doMerge(agent: string, confirmed: boolean) {
    const d = diff && diff.agent === agent ? diff : null;
    if (!confirmed && d && (d.config.length || d.cut)) { setConfirming(true); return; }
    setConfirming(false);
    setBusy(true);
    try {
      // The work shown is the work merged (tree): the daemon refuses it
      // when the agent changed it since.
      const body = !d ? undefined : confirmed ? { tree: d.tree, include_config: d.config, force: d.cut } : { tree: d.tree };
      const r = await call<MergeResult>("POST", `${agentPath(project, agent)}/merge`, body);
      setMerge({ ok: true, text: r.merged ? `merged ${r.branch} into ${r.into}${r.commit ? ` (${r.commit.slice(0, 10)})` : ""}${r.committed ? "; the agent's uncommitted work was committed first" : ""}${r.config?.length ? `; tool configuration merged: ${r.config.join(", ")}` : ""}` : `nothing to merge: ${r.branch} has no work that ${r.into} lacks` });
      loadList(); loadDiff(agent);
    } catch (e) { setMerge({ ok: false, text: (e as Error).message }); }
    setBusy(false);
  }

  const config = new Set(diff?.config || []);
  // Tool configuration first (the daemon sends it first; kept so here).
  const files = diff ? parseDiff(diff.text).sort((a, b) => Number(config.has(b.name)) - Number(config.has(a.name))) : [];
  const wt = list?.worktrees.find((w) => w.agent === arg);
  return (
    <section id="changes" aria-label="changes">
      {err && <p class="err" role="alert" id="changes-error">{err}</p>}
      <table id="worktrees">
        <thead><tr><th>agent</th><th>branch</th><th>base</th><th>state</th></tr></thead>
        <tbody>
          {list?.worktrees.map((w) => (
            <tr key={w.agent} data-agent={w.agent} class={w.agent === arg ? "selected" : ""}>
              <td><a href="#" onClick={(e) => { e.preventDefault(); navigate({ view: "changes", arg: w.agent }); }}>{w.agent}</a>{w.orphan ? " (removed from the team)" : ""}</td>
              <td>{w.branch}</td>
              <td>{w.fork_point ? <>forked at <code>{short(w.fork_point)}</code> from {w.base}</> : w.base}{w.behind ? ` (now ${short(w.base_commit)})` : ""}</td>
              <td>{w.error ? <span class="err">{w.error}</span> : !w.exists ? "not made yet" :
                [w.dirty ? `uncommitted: ${w.changed || 0} file(s)` : "clean", w.ahead ? `${w.ahead} commit(s) ahead` : "", w.behind ? `${w.behind} behind` : ""].filter(Boolean).join(" · ")}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list && !list.worktrees.length && <p class="note" id="no-worktrees">No agent of this project has <code>workspace = "worktree"</code>: their changes are in the project's folder.</p>}
      {list?.cut ? <p class="note">{list.cut} more folder(s) not looked at.</p> : null}
      {arg && (
        <div id="diff-view" data-agent={arg}>
          <div class="agent-head">
            <h2>{arg}'s changes</h2>
            <span class="note">{wt ? wt.branch : ""}</span>
            <span class="buttons">
              <button type="button" id="diff-refresh" onClick={() => { loadList(); loadDiff(arg); }}>Refresh</button>
              <button type="button" id="merge" disabled={busy} title="commit the agent's work on its branch, then merge it into the project's current branch"
                onClick={() => doMerge(arg, false)}>Merge</button>
            </span>
          </div>
          {confirming && diff && (
            <div id="merge-confirm" class="confirm" role="alertdialog" aria-label="confirm merge">
              {diff.config.length > 0 && (
                <>
                  <p>This merge changes <b>tool configuration</b>: what agents, engines, git or your editor may do or run. Read these files' changes below first:</p>
                  <ul id="merge-config">{diff.config.map((f) => <li key={f}><code>{f}</code></li>)}</ul>
                </>
              )}
              {diff.cut && <p id="merge-cut">The diff is <b>cut</b>: only its start is shown. Review the branch with git before merging.</p>}
              <button type="button" id="merge-confirm-yes" disabled={busy} onClick={() => doMerge(arg, true)}>
                {diff.config.length ? `Merge, including ${diff.config.length} tool configuration file(s)` : "Merge the cut diff"}
              </button>{" "}
              <button type="button" id="merge-confirm-no" onClick={() => setConfirming(false)}>Cancel</button>
            </div>
          )}
          {merge && <p id="merge-result" class={merge.ok ? "note" : "err"} role="status">{merge.text}</p>}
          {diff && (
            <>
              {diff.outlook && <OutlookLine branch={wt?.branch || arg} o={diff.outlook} />}
              <p class="note" id="diff-summary">{files.length} file(s) · +{files.reduce((n, f) => n + f.added, 0)} −{files.reduce((n, f) => n + f.removed, 0)}</p>
              {diff.config.length > 0 && <p class="err" id="diff-config">Tool configuration changed (shown first): {diff.config.join(", ")}. Merge asks before bringing it in.</p>}
              {diff.cut && <p class="err" id="diff-cut">This diff is cut: its last line says how much more there is. Merge asks before merging what is not shown.</p>}
              {!files.length && <p class="note">No changes against the base.</p>}
              {files.map((f) => <FileBox key={f.name} f={f} open={files.length <= 5 || config.has(f.name)} config={config.has(f.name)} />)}
            </>
          )}
        </div>
      )}
    </section>
  );
}

registerView({ id: "changes", label: "Changes", component: ChangesView, inNav: true });
