// One agent: its state, controls, and its transcript turn by turn: the
// journal's recent turns, then what the event feed streams. Each turn's
// checkpoint of the workspace (C18) is on its card: what it changed, its
// files, and a rewind to it; the other checkpoints are listed above.
import { registerView } from "../router";
import { Checkpoints, Item, TurnView, app, checkpointDiff, control, decide, loadCheckpoints, loadChecks, loadLog, rewind, useApp } from "../store";
import { Clip } from "../clip";
import { Unsandboxed } from "../sandbox";
import { RunsOn } from "../runner";
import { ago, clock, duration, prettyJSON, visible, when } from "../format";
import { FileBox, parseDiff } from "../diff";
import { byTurn, changeLine, reasonLine, skippedLine, unshown } from "../checkpoints";
import { useEffect, useState } from "preact/hooks";
import type { CheckResult, Checkpoint, Usage } from "../api";

function UsageLine({ u }: { u: Usage }) {
  return (
    <span class="usage">
      {u.input_tokens} in · {u.output_tokens} out
      {u.cache_read_tokens ? ` · ${u.cache_read_tokens} cached` : ""}
      {u.cost_usd ? ` · $${u.cost_usd.toFixed(4)}` : ""}
    </span>
  );
}

function ItemView({ it }: { it: Item }) {
  switch (it.kind) {
    case "text":
      return <div class="item text"><Clip text={it.text} cut={it.cut} /></div>;
    case "notice":
      return <div class="item notice"><Clip text={it.text} cut={it.cut} /></div>;
    case "checkpoint":
      return <div class="item notice checkpoint-note"><Clip text={it.text} cut={it.cut} /></div>;
    case "thinking":
      return (
        <details class="item thinking">
          <summary>thinking</summary>
          <Clip text={it.text} cut={it.cut} />
        </details>
      );
    case "tool":
      return (
        <details class="item tool" data-tool={it.name} data-tool-id={it.id}>
          <summary>
            <span class="tool-name">{it.name}</span>{" "}
            <span class={`tool-state ${it.isError ? "err" : ""}`}>{!it.done ? "running…" : it.isError ? "failed" : "done"}</span>
          </summary>
          <h4>input</h4>
          <Clip text={prettyJSON(it.input)} cut={it.cut} />
          {it.done && <><h4>result</h4><Clip text={it.output || ""} /></>}
        </details>
      );
    case "permission":
      return (
        <div class={`item permission perm-${it.state}`} data-permission={it.id}>
          <div><strong>asks to use {it.tool}</strong>{it.title ? `: ${it.title}` : ""} — <span class="pstate">{it.state}</span>
            {it.reason ? ` (${it.reason})` : ""}</div>
          <Clip text={prettyJSON(it.input)} />
          {it.state === "pending" && (
            <div class="buttons">
              <button type="button" class="allow" onClick={() => decide(it.id, true)}>Allow</button>
              <button type="button" class="deny" onClick={() => decide(it.id, false)}>Deny</button>
            </div>
          )}
        </div>
      );
  }
}

// Tools that change files, by the engines' names: Claude Code's Edit,
// Write, MultiEdit and NotebookEdit, Codex's apply_patch (its fileChange
// items), OpenCode's edit, write and patch. Over ACP a tool call is named
// by its title, so an input with OpenCode's edit shape (filePath with
// content, oldString or newString) counts too.
const editTools = new Set(["edit", "write", "multiedit", "notebookedit", "apply_patch", "patch"]);
const editShape = (v: any) => typeof v.filePath === "string" && ("content" in v || "oldString" in v || "newString" in v);

/** turnFiles lists the files a turn's edit tool calls name (their input's
 * file_path, filePath, notebook_path, path, or changes[].path). */
export function turnFiles(items: Item[]): string[] {
  const out = new Set<string>();
  for (const it of items) {
    if (it.kind !== "tool") continue;
    let v: any;
    try { v = JSON.parse(it.input); } catch { continue; }
    if (!v || typeof v !== "object") continue;
    if (!editTools.has(it.name.toLowerCase()) && !editShape(v)) continue;
    for (const k of ["file_path", "filePath", "notebook_path", "path"]) if (typeof v[k] === "string") out.add(v[k]);
    if (Array.isArray(v.changes)) for (const c of v.changes) if (c && typeof c.path === "string") out.add(c.path);
  }
  return [...out];
}

// CheckpointFiles shows what checkpoint seq changed: git's --stat, then
// the whole patch on demand.
function CheckpointFiles({ agent, seq }: { agent: string; seq: number }) {
  const [stat, setStat] = useState<{ text: string; cut: boolean } | null>(null);
  const [patch, setPatch] = useState<{ text: string; cut: boolean } | null>(null);
  const [showPatch, setShowPatch] = useState(false);
  const [err, setErr] = useState("");
  useEffect(() => {
    checkpointDiff(agent, seq, true).then((d) => setStat({ text: d.diff, cut: d.cut }), (e) => setErr((e as Error).message));
  }, [agent, seq]);
  function togglePatch() {
    const on = !showPatch;
    setShowPatch(on);
    if (on && !patch) checkpointDiff(agent, seq, false).then((d) => setPatch({ text: d.diff, cut: d.cut }), (e) => setErr((e as Error).message));
  }
  const files = patch ? parseDiff(patch.text) : [];
  return (
    <div class="cp-files">
      {err && <p class="err cp-error">{err}</p>}
      {!stat && !err && <p class="note">reading…</p>}
      {stat && (stat.text.trim() ? <pre class="cp-stat">{visible(stat.text)}</pre> : <p class="note">No files changed.</p>)}
      {stat?.cut && <p class="note">The summary is cut: its last line says how much more there is.</p>}
      {stat && stat.text.trim() && (
        <button type="button" class="link cp-patch-toggle" aria-expanded={showPatch} onClick={togglePatch}>
          {showPatch ? "hide the patch" : "the whole patch"}
        </button>
      )}
      {showPatch && patch && (
        <div class="cp-patch">
          {patch.cut && <p class="err">This patch is cut: its last line says how much more there is.</p>}
          {files.map((f) => <FileBox key={f.name} f={f} open={files.length <= 5} config={false} />)}
        </div>
      )}
      {showPatch && !patch && !err && <p class="note">reading…</p>}
    </div>
  );
}

// CheckpointControls are a checkpoint's files and its rewind, asked
// first; the daemon's answer stays shown under it.
function CheckpointControls({ agent, cp, busy, label }: { agent: string; cp: Checkpoint; busy: boolean; label: string }) {
  const [open, setOpen] = useState(false);
  const [asking, setAsking] = useState(false);
  const [sending, setSending] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const what = cp.reason === "turn" ? "at the end of this turn" : `at checkpoint ${cp.seq} (${reasonLine(cp)})`;
  async function go() {
    setAsking(false);
    setSending(true);
    setResult(await rewind(agent, cp.seq));
    setSending(false);
  }
  const skipped = skippedLine(cp);
  return (
    <div class="checkpoint" data-checkpoint={cp.seq}>
      <span class="cp-change">{label}{changeLine(cp)}</span>
      {skipped && <span class="err cp-skipped"> · {visible(skipped)}</span>}{" "}
      <button type="button" class="link cp-files-toggle" aria-expanded={open} onClick={() => setOpen(!open)}>{open ? "hide files" : "Files"}</button>{" "}
      <button type="button" class="cp-rewind" disabled={busy || sending} title={busy ? `${agent} is in a turn: rewind when it is idle` : `put ${agent}'s files back as they were ${what}`}
        onClick={() => { setResult(null); setAsking(true); }}>Rewind to here</button>
      {asking && (
        <div class="confirm cp-confirm" role="alertdialog" aria-label="confirm rewind">
          <p>Put {agent}'s files back as they were {what}? A checkpoint of the present is made first, so this can be undone.</p>
          <button type="button" class="cp-rewind-yes" disabled={busy || sending} onClick={go}>Rewind</button>{" "}
          <button type="button" class="cp-rewind-no" onClick={() => setAsking(false)}>Cancel</button>
        </div>
      )}
      {result && <p class={`cp-result ${result.ok ? "note" : "err"}`} role="status">{result.text}</p>}
      {open && <CheckpointFiles agent={agent} seq={cp.seq} />}
    </div>
  );
}

const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

const checkpointPage = 50; // rows of the Checkpoints list shown, until "show more"

// CheckpointList lists, newest first, the checkpoints no turn card shows
// (a reset's, a rewind's, older turns'), or says why there are none.
function CheckpointList({ agent, cs, shown, busy }: { agent: string; cs: Checkpoints | undefined; shown: string[]; busy: boolean }) {
  const [limit, setLimit] = useState(checkpointPage);
  useEffect(() => setLimit(checkpointPage), [agent]);
  if (!cs) return null;
  const rows = unshown(cs.list, shown);
  if (!rows.length && !cs.unavailable && !cs.error) return null;
  return (
    <section id="checkpoints" aria-label="checkpoints">
      <h3>Checkpoints</h3>
      {cs.unavailable && <p class="note" id="no-checkpoints">{upperFirst(cs.unavailable)}</p>}
      {cs.error && <p class="err" id="checkpoints-error">The checkpoints could not be read: {cs.error}</p>}
      <ul class="checkpoint-list">
        {rows.slice(0, limit).map((c) => (
          <li key={c.seq}>
            <span class="meta"><time dateTime={c.at}>{when(c.at)}</time> · {visible(reasonLine(c))}</span>
            <CheckpointControls agent={agent} cp={c} busy={busy} label={`checkpoint ${c.seq}: `} />
          </li>
        ))}
      </ul>
      {rows.length > limit && (
        <button type="button" class="link" id="checkpoints-more" onClick={() => setLimit(limit + checkpointPage)}>
          show more ({rows.length - limit} older)
        </button>
      )}
    </section>
  );
}

// CheckBadge is a check's verdict on the turn it checked (troupe ran it,
// internal/check): its name and state; its output one click away.
function CheckBadge({ r }: { r: CheckResult }) {
  const state = r.state.replace("_", " ");
  return (
    <details class={`check check-${r.state}`} data-check={r.check} data-check-id={r.id}>
      <summary><span class="check-badge">{r.check}: {state}</span></summary>
      <div class="meta">
        <code>{visible(r.command)}</code>{r.dir ? ` in ${visible(r.dir)}` : ""}
        {r.exit_code >= 0 ? ` · exit ${r.exit_code}` : ""} · {duration(r.duration_ms)} · <time dateTime={r.started_at}>{clock(r.started_at)}</time>
        {r.reason ? <> · {visible(r.reason)}</> : null}
      </div>
      {r.output_cut && <p class="note">{visible(r.output_cut)}</p>}
      <Clip text={r.output} />
    </details>
  );
}

function TurnBox({ t, agent, cp, busy, checks }: { t: TurnView; agent: string; cp?: Checkpoint; busy: boolean; checks?: CheckResult[] }) {
  const files = turnFiles(t.items);
  return (
    <li class={`turn ${t.ended ? "ended" : "live"}${t.error ? " failed" : ""}`} data-turn={t.turn}>
      <div class="meta">
        turn {t.turn} · <time dateTime={t.startedAt}>{clock(t.startedAt)}</time>
        {t.from.length ? ` · from ${t.from.join(", ")}` : ""}
        {t.ended ? (t.durationMs ? ` · ${duration(t.durationMs)}` : "") : " · running…"}
        {t.usage && <> · <UsageLine u={t.usage} /></>}
      </div>
      {files.length > 0 && <div class="turn-files">changed: {files.map((f, i) => <>{i ? ", " : ""}<code key={f}>{f}</code></>)}</div>}
      {cp && <CheckpointControls agent={agent} cp={cp} busy={busy} label={`checkpoint ${cp.seq}: `} />}
      {checks && checks.length > 0 && <div class="turn-checks">{checks.map((r) => <CheckBadge key={r.id} r={r} />)}</div>}
      {t.asked && <div class="asked"><Clip text={t.asked} /></div>}
      {t.items.map((it, i) => <ItemView key={i} it={it} />)}
      {t.error && <p class="err">{t.error}</p>}
    </li>
  );
}

function AgentView({ arg }: { arg: string }) {
  const a = useApp();
  // The journal once per agent shown (live events may have made some turns
  // already; loadLog merges them).
  useEffect(() => { if (arg && !a.logBefore.has(arg)) loadLog(arg); }, [arg, a.route.project]);
  useEffect(() => { if (arg) loadCheckpoints(arg); }, [arg, a.route.project]);
  useEffect(() => { if (arg) loadChecks(arg); }, [arg, a.route.project]);
  const ag = a.agents.find((x) => x.name === arg);
  if (!ag) return <p class="note">No agent {arg} in this project.</p>;
  const turns = a.turns.get(arg) || [];
  const last = a.lastActivity.get(arg);
  const cs = a.checkpoints.get(arg);
  const cps = byTurn(cs?.list || []);
  // Each turn's check results, newest first.
  const checks = new Map<string, CheckResult[]>();
  for (const r of a.checks.get(arg) || []) if (r.turn) checks.set(r.turn, [...(checks.get(r.turn) || []), r]);
  // Rewinding in a turn is refused by the daemon; the button says so first.
  const busy = ag.state === "busy";
  return (
    <section id="agent" aria-label={`agent ${arg}`} data-agent={arg}>
      <div class="agent-head">
        <h2>{arg}</h2>
        <span class={`state state-${ag.state}`} id="agent-state">{ag.state}{ag.reason ? ` — ${ag.reason}` : ""}</span>
        {ag.doing && <span class="note" id="agent-doing">{visible(ag.doing)}{ag.doing_since ? `, since ${ago(Date.parse(ag.doing_since))}` : ""}</span>}
        <span class="note">{ag.engine}{ag.model ? ` · ${ag.model}` : ""}{last ? ` · last activity ${ago(last)}` : ""}</span>
        {ag.sandboxed ? <span class="note" id="agent-sandbox">sandboxed</span> : <span id="agent-sandbox"><Unsandboxed /></span>}
        <RunsOn ag={ag} />
        {(ag.mode === "terminal" || ag.engine === "terminal") && (
          <a id="agent-terminal" href={`#/p/${encodeURIComponent(a.route.project)}/terminal/${encodeURIComponent(arg)}`}>its terminal</a>
        )}
        <span class="buttons">
          <button type="button" id="interrupt" disabled={ag.state !== "busy" && ag.state !== "waiting"} onClick={() => control(arg, "interrupt")}>Interrupt</button>
          <button type="button" id="restart" title="a new session that resumes the same conversation" onClick={() => control(arg, "restart")}>Restart</button>
          <button type="button" id="reset" onClick={() => { if (confirm(`Start a new conversation for ${arg}? Its current one is forgotten.`)) control(arg, "reset"); }}>Reset conversation</button>
        </span>
      </div>
      {a.logBefore.get(arg) ? <button type="button" id="older-turns" onClick={() => loadLog(arg, true)}>load older turns</button> : null}
      <CheckpointList agent={arg} cs={cs} shown={turns.map((t) => t.turn)} busy={busy} />
      <ol id="transcript">
        {turns.map((t) => <TurnBox key={t.turn} t={t} agent={arg} cp={cps.get(t.turn)} busy={busy} checks={checks.get(t.turn)} />)}
      </ol>
      {!turns.length && <p class="note">No turns yet.</p>}
    </section>
  );
}

registerView({ id: "agent", label: "Agent", component: AgentView, inNav: false });
void app;
