// Attempts: one task given to several worktree agents from the project's
// HEAD, judged by a check (POST …/attempts; troupe attempt). The list of
// the project's attempts and a form to start one (the task, the worktree
// agents as checkboxes, the check); an attempt's compare view: its
// members side by side (rank, verdict, exit, +/-, files, time, cost, the
// reason of each rank), each one's check output and its diff one click
// away (the Changes view), Merge for the winner (the existing merge: a
// diff that changes tool configuration or is cut goes to the Changes view
// to be confirmed there) and Discard for the others (their worktrees
// reset, as troupe worktree reset does). Read again at each
// attempt.changed of the project.
import { useEffect, useState } from "preact/hooks";
import { registerView } from "../router";
import { app, navigate, useApp } from "../store";
import { agentPath, call, projectPath } from "../api";
import type { Attempt, AttemptMember, AttemptRequest, DiscardAttemptResponse } from "../api";
import { duration, when } from "../format";

interface Worktree { agent: string; orphan?: boolean }
interface DiffResponse { config: string[]; cut: boolean; tree: string }
interface MergeResult { merged: boolean; branch: string; into: string; commit?: string }

const attemptsPath = (p: string) => `${projectPath(p)}/attempts`;

function cost(m: AttemptMember) { return m.cost_usd === undefined ? "–" : `$${m.cost_usd.toFixed(4)}`; }

function StartForm({ project, onStarted }: { project: string; onStarted: (a: Attempt) => void }) {
  const [agents, setAgents] = useState<string[]>([]);
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [task, setTask] = useState("");
  const [check, setCheck] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    call<{ worktrees: Worktree[] }>("GET", `${projectPath(project)}/worktrees`)
      .then((l) => setAgents(l.worktrees.filter((w) => !w.orphan).map((w) => w.agent)))
      .catch((e) => setErr((e as Error).message));
  }, [project]);
  async function start(e: Event) {
    e.preventDefault();
    setBusy(true);
    try {
      const body: AttemptRequest = { task, agents: agents.filter((a) => picked.has(a)) };
      if (check.trim()) body.check = check.trim();
      const a = await call<Attempt>("POST", attemptsPath(project), body);
      setErr(""); setTask("");
      onStarted(a);
    } catch (e) { setErr((e as Error).message); }
    setBusy(false);
  }
  const toggle = (a: string) => { const s = new Set(picked); if (s.has(a)) s.delete(a); else s.add(a); setPicked(s); };
  return (
    <form id="attempt-form" onSubmit={start} aria-label="start an attempt">
      <textarea id="attempt-task" value={task} placeholder="the task, given to each agent" aria-label="task" rows={3}
        onInput={(e) => setTask((e.target as HTMLTextAreaElement).value)} />
      <fieldset id="attempt-agents">
        <legend>worktree agents (at most 8)</legend>
        {agents.map((a) => (
          <label key={a}><input type="checkbox" data-agent={a} checked={picked.has(a)} onChange={() => toggle(a)} /> {a}</label>
        ))}
        {!agents.length && <span class="note">No agent of this project has <code>workspace = "worktree"</code>.</span>}
      </fieldset>
      <input id="attempt-check" value={check} placeholder="check (default: the project's only one)" aria-label="check"
        onInput={(e) => setCheck((e.target as HTMLInputElement).value)} />
      <button type="submit" id="attempt-start" disabled={busy || !task.trim() || !picked.size}>Start</button>
      {err && <p class="err" role="alert" id="attempt-form-error">{err}</p>}
    </form>
  );
}

function Compare({ project, a, reload }: { project: string; a: Attempt; reload: () => void }) {
  const [note, setNote] = useState<{ ok: boolean; text: string } | null>(null);
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  useEffect(() => { setNote(null); setConfirm(false); }, [a.id]);

  async function merge(agent: string) {
    setBusy(true);
    try {
      // The existing merge, of the work shown in the Changes view: tool
      // configuration or a cut diff is confirmed there.
      const d = await call<DiffResponse>("GET", `${agentPath(project, agent)}/diff`);
      if ((d.config && d.config.length) || d.cut) { navigate({ view: "changes", arg: agent }); return; }
      const r = await call<MergeResult>("POST", `${agentPath(project, agent)}/merge`, { tree: d.tree });
      setNote({ ok: true, text: r.merged ? `merged ${r.branch} into ${r.into}${r.commit ? ` (${r.commit.slice(0, 10)})` : ""}` : `nothing to merge: ${r.branch} has no work that ${r.into} lacks` });
    } catch (e) { setNote({ ok: false, text: (e as Error).message }); }
    setBusy(false);
  }
  async function discard() {
    setConfirm(false); setBusy(true);
    try {
      const r = await call<DiscardAttemptResponse>("POST", `${attemptsPath(project)}/${a.id}/discard`);
      setNote({ ok: true, text: r.reset.length ? `reset the worktrees of ${r.reset.join(", ")}` : "no worktree to reset" });
      reload();
    } catch (e) { setNote({ ok: false, text: (e as Error).message }); }
    setBusy(false);
  }

  const winner = a.winner ? `winner ${a.winner}` : a.state === "done" ? `no winner: no agent passed ${a.check} with a change` : "running…";
  return (
    <div id="attempt-compare" data-attempt={a.id} data-state={a.state}>
      <div class="agent-head">
        <h2>attempt {a.id}: {winner}</h2>
        <span class="note">check {a.check} · base {a.base.slice(0, 10)} · {when(a.created_at)}</span>
        <span class="buttons">
          {a.winner && <button type="button" id="attempt-merge" disabled={busy} title="merge the winner's branch into the project's current branch"
            onClick={() => merge(a.winner!)}>Merge {a.winner}</button>}
          {a.state === "done" && !a.discarded && a.members.length > 1 &&
            <button type="button" id="attempt-discard" disabled={busy} onClick={() => setConfirm(true)}>Discard the others</button>}
        </span>
      </div>
      <p class="note" id="attempt-task-text">{a.task}</p>
      {confirm && (
        <div id="attempt-discard-confirm" class="confirm" role="alertdialog" aria-label="confirm discard">
          <p>This resets the worktrees of {a.members.filter((m) => m.agent !== a.winner).map((m) => m.agent).join(", ")} to their base, dropping their work (a checkpoint of each is kept).</p>
          <button type="button" id="attempt-discard-yes" onClick={discard}>Reset them</button>{" "}
          <button type="button" onClick={() => setConfirm(false)}>Cancel</button>
        </div>
      )}
      {note && <p id="attempt-note" class={note.ok ? "note" : "err"} role="status">{note.text}</p>}
      <table id="attempt-members">
        <thead><tr><th>rank</th><th>agent</th><th>engine/model</th><th>state</th><th>verdict</th><th>exit</th><th>+/−</th><th>files</th><th>time</th><th>cost</th><th></th></tr></thead>
        <tbody>
          {a.members.map((m) => (
            <tr key={m.agent} data-agent={m.agent} data-rank={m.rank || 0} class={m.agent === a.winner ? "selected" : ""}>
              <td>{m.rank || "–"}</td>
              <td>{m.agent}</td>
              <td>{m.engine}{m.model ? `/${m.model}` : ""}</td>
              <td>{m.state}</td>
              <td class={`verdict verdict-${m.verdict || "none"}`}>{m.verdict || "–"}</td>
              <td>{m.verdict && m.exit_code >= 0 ? m.exit_code : "–"}</td>
              <td>+{m.change.added} −{m.change.deleted}</td>
              <td>{m.change.files}</td>
              <td>{m.duration_ms ? duration(m.duration_ms) : "–"}</td>
              <td>{cost(m)}</td>
              <td><a href="#" class="attempt-diff" onClick={(e) => { e.preventDefault(); navigate({ view: "changes", arg: m.agent }); }}>diff</a></td>
            </tr>
          ))}
        </tbody>
      </table>
      {a.members.map((m) => (
        <details key={m.agent} class="attempt-output" data-agent={m.agent} open={a.members.length <= 3}>
          <summary>{m.agent}{m.reason ? `: ${m.reason}` : ""}</summary>
          {m.error && <p class="err">{m.error}</p>}
          {m.check ? <p class="note">check {a.check}, result {m.check}</p> : null}
          {m.output ? <pre>{m.output}</pre> : <p class="note">{m.state === "done" ? "no output" : "not checked yet"}</p>}
        </details>
      ))}
    </div>
  );
}

function AttemptsView({ arg }: { arg: string }) {
  const st = useApp();
  const project = app.route.project;
  const [list, setList] = useState<Attempt[] | null>(null);
  const [cur, setCur] = useState<Attempt | null>(null);
  const [err, setErr] = useState("");
  async function load() {
    try {
      setList(await call<Attempt[]>("GET", attemptsPath(project)));
      setCur(arg ? await call<Attempt>("GET", `${attemptsPath(project)}/${encodeURIComponent(arg)}`) : null);
      setErr("");
    } catch (e) { setErr((e as Error).message); }
  }
  useEffect(() => { load(); }, [project, arg, st.attemptsRev]);
  return (
    <section id="attempts" aria-label="attempts">
      {err && <p class="err" role="alert" id="attempts-error">{err}</p>}
      <StartForm project={project} onStarted={(a) => navigate({ view: "attempts", arg: String(a.id) })} />
      <table id="attempt-list">
        <thead><tr><th>attempt</th><th>state</th><th>agents</th><th>check</th><th>winner</th><th>task</th></tr></thead>
        <tbody>
          {list?.map((a) => (
            <tr key={a.id} data-attempt={a.id} class={String(a.id) === arg ? "selected" : ""}>
              <td><a href="#" onClick={(e) => { e.preventDefault(); navigate({ view: "attempts", arg: String(a.id) }); }}>{a.id}</a></td>
              <td>{a.state}{a.discarded ? ", discarded" : ""}</td>
              <td>{a.members.map((m) => m.agent).join(", ")}</td>
              <td>{a.check}</td>
              <td>{a.winner || (a.state === "done" ? "(none)" : "")}</td>
              <td class="cmd">{a.task.split("\n")[0].slice(0, 100)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list && !list.length && <p class="note" id="no-attempts">No attempt yet: give one task to several worktree agents above, and merge the one that passes the check.</p>}
      {cur && <Compare project={project} a={cur} reload={load} />}
    </section>
  );
}

registerView({ id: "attempts", label: "Attempts", component: AttemptsView, inNav: true });
