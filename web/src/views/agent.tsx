// One agent: its state, controls, and its transcript turn by turn: the
// journal's recent turns, then what the event feed streams.
import { registerView } from "../router";
import { Item, TurnView, app, control, decide, loadLog, useApp } from "../store";
import { Clip } from "../clip";
import { Unsandboxed } from "../sandbox";
import { ago, clock, duration, prettyJSON, visible } from "../format";
import { useEffect } from "preact/hooks";
import type { Usage } from "../api";

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

function TurnBox({ t }: { t: TurnView }) {
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
  const ag = a.agents.find((x) => x.name === arg);
  if (!ag) return <p class="note">No agent {arg} in this project.</p>;
  const turns = a.turns.get(arg) || [];
  const last = a.lastActivity.get(arg);
  return (
    <section id="agent" aria-label={`agent ${arg}`} data-agent={arg}>
      <div class="agent-head">
        <h2>{arg}</h2>
        <span class={`state state-${ag.state}`} id="agent-state">{ag.state}{ag.reason ? ` — ${ag.reason}` : ""}</span>
        {ag.doing && <span class="note" id="agent-doing">{visible(ag.doing)}{ag.doing_since ? `, since ${ago(Date.parse(ag.doing_since))}` : ""}</span>}
        <span class="note">{ag.engine}{ag.model ? ` · ${ag.model}` : ""}{last ? ` · last activity ${ago(last)}` : ""}</span>
        {ag.sandboxed ? <span class="note" id="agent-sandbox">sandboxed</span> : <span id="agent-sandbox"><Unsandboxed /></span>}
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
      <ol id="transcript">
        {turns.map((t) => <TurnBox key={t.turn} t={t} />)}
      </ol>
      {!turns.length && <p class="note">No turns yet.</p>}
    </section>
  );
}

registerView({ id: "agent", label: "Agent", component: AgentView, inNav: false });
void app;
