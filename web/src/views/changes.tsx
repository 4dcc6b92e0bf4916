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
  agent: string; path: string; branch: string; base: string; base_commit?: string; exists: boolean;
  orphan?: boolean; dirty?: boolean; changed?: number; ahead?: number; error?: string;
}
interface WorktreeList { worktrees: Worktree[]; cut?: number }
interface MergeResult { committed: boolean; merged: boolean; branch: string; into: string; commit?: string; config?: string[] }
interface DiffResponse { diff: string; config: string[]; cut: boolean; tree: string }

function ChangesView({ arg }: { arg: string }) {
  useApp();
  const project = app.route.project;
  const [list, setList] = useState<WorktreeList | null>(null);
  const [diff, setDiff] = useState<{ agent: string; text: string; config: string[]; cut: boolean; tree: string } | null>(null);
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
      setDiff({ agent, text: d.diff, config: d.config || [], cut: d.cut, tree: d.tree }); setErr("");
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
              <td>{w.base}{w.base_commit ? ` (${w.base_commit.slice(0, 8)})` : ""}</td>
              <td>{w.error ? <span class="err">{w.error}</span> : !w.exists ? "not made yet" :
                [w.dirty ? `uncommitted: ${w.changed || 0} file(s)` : "clean", w.ahead ? `${w.ahead} commit(s) ahead` : ""].filter(Boolean).join(" · ")}</td>
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
            <span class="note">{wt ? `${wt.branch} against ${wt.base}` : ""}</span>
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
