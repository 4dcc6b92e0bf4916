// Claude sessions: this machine's Claude Code sessions (GET
// /api/claude-sessions), live or dead, with a search box and a live
// filter; one session's detail and transcript, followed while it is live
// (observe); hand-off of a dead session to one of the project's Claude
// agents; and, for resume and fork, which run in the person's own
// terminal, the exact command to copy. C9: a live session can be observed
// or forked, never resumed.
import { useEffect, useRef, useState } from "preact/hooks";
import { registerView } from "../router";
import { app, navigate, useApp } from "../store";
import { ApiError, call, enc } from "../api";
import { ago, visible } from "../format";

interface Session {
  id: string; cwd: string; cwd_exists: boolean; title: string; title_kind: string; first_prompt: string;
  first: string; last: string; messages: number; messages_partial?: boolean; model?: string; version?: string;
  size: number; path: string; skipped_lines: number; project?: string; agent?: { project: string; agent: string };
  live: boolean; status?: string; waiting_for?: string; pids?: number[]; doubt?: string; held_by?: string;
}
interface SessionList { sessions: Session[]; total: number; registry_unreadable?: string[] }
interface Entry { time: string; role: string; text: string }
interface Chunk { entries: Entry[]; next: number; size: number; skipped_lines: number; live: boolean }

const maxEntries = 1000; // kept in the page; older ones are dropped, saying so

function liveLabel(s: Session) {
  if (!s.live) return "dead";
  return `live${s.status ? ` · ${s.status}` : ""}${s.waiting_for ? ` (${s.waiting_for})` : ""}`;
}

function Copy({ id, text }: { id: string; text: string }) {
  const [done, setDone] = useState(false);
  return (
    <div class="copy">
      <code id={id}>{text}</code>{" "}
      <button type="button" class="link" onClick={async () => {
        try { await navigator.clipboard.writeText(text); setDone(true); } catch { setDone(false); }
      }}>{done ? "copied" : "copy"}</button>
    </div>
  );
}

function Transcript({ s }: { s: Session }) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [dropped, setDropped] = useState(0);
  const [live, setLive] = useState(s.live);
  const [err, setErr] = useState("");
  const box = useRef<HTMLOListElement>(null);

  useEffect(() => {
    const ac = new AbortController();
    let offset = 0, all: Entry[] = [], gone = 0;
    (async () => {
      for (;;) {
        let c: Chunk;
        try {
          const wait = offset > 0 ? "&wait=20s" : "";
          const r = await fetch(`/api/claude-sessions/${enc(s.id)}/transcript?offset=${offset}${wait}`, { credentials: "same-origin", signal: ac.signal });
          const body = await r.json().catch(() => null);
          if (!r.ok) throw new ApiError(body?.error || `HTTP ${r.status}`, r.status);
          c = body as Chunk;
        } catch (e) {
          if (ac.signal.aborted) return;
          setErr((e as Error).message);
          await new Promise((res) => setTimeout(res, 3000));
          if (ac.signal.aborted) return;
          continue;
        }
        setErr("");
        all = all.concat(c.entries || []);
        if (all.length > maxEntries) { gone += all.length - maxEntries; all = all.slice(-maxEntries); }
        const el = box.current;
        const atEnd = !el || el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
        setEntries(all); setDropped(gone); setLive(c.live);
        if (atEnd) requestAnimationFrame(() => { if (box.current) box.current.scrollTop = box.current.scrollHeight; });
        const more = c.next < c.size;
        offset = c.next;
        if (!more && !c.live) return; // read to the end of a dead session
      }
    })();
    return () => ac.abort();
  }, [s.id]);

  return (
    <>
      <p class="note" id="transcript-state">{live ? "following the live session (observe)…" : "the session is dead: its whole transcript"}
        {dropped ? ` · ${dropped} earlier entries not shown` : ""}</p>
      {err && <p class="err" role="alert">{err}</p>}
      <ol id="session-transcript" ref={box} class="session-transcript">
        {entries.map((e, i) => (
          <li key={i} class={`entry role-${e.role}`}><span class="meta">{e.role}{e.time ? ` · ${new Date(e.time).toLocaleTimeString()}` : ""}</span><pre>{visible(e.text)}</pre></li>
        ))}
      </ol>
    </>
  );
}

function Detail({ id, refresh }: { id: string; refresh: () => void }) {
  const a = useApp();
  const [s, setS] = useState<Session | null>(null);
  const [err, setErr] = useState("");
  const claudeAgents = a.agents.filter((x) => x.engine === "claude");
  const [to, setTo] = useState("");
  const [handoff, setHandoff] = useState<{ ok: boolean; text: string } | null>(null);

  async function load() {
    try { setS(await call<Session>("GET", `/api/claude-sessions/${enc(id)}`)); setErr(""); } catch (e) { setS(null); setErr((e as Error).message); }
  }
  useEffect(() => { setHandoff(null); load(); }, [id]);

  async function handOff(e: Event) {
    e.preventDefault();
    const agent = to || claudeAgents[0]?.name;
    if (!agent) return;
    try {
      await call<Session>("POST", `/api/claude-sessions/${enc(id)}/hand-off`, { project: a.route.project, agent });
      setHandoff({ ok: true, text: `${agent}'s next session resumes this conversation.` });
      load(); refresh();
    } catch (e2) {
      const ae = e2 as ApiError;
      const why = ae.status === 409 ? "refused (conflict): " : ae.status === 400 ? "refused: " : ae.status === 404 ? "not found: " : "";
      setHandoff({ ok: false, text: why + ae.message });
    }
  }

  if (err) return <p class="err" role="alert">{err}</p>;
  if (!s) return <p class="note">loading…</p>;
  return (
    <article id="session" data-session={s.id} data-live={s.live ? "1" : "0"}>
      <h3>{s.title || "(untitled)"} <span class={s.live ? "live" : "dead"}>{liveLabel(s)}</span></h3>
      <dl class="facts">
        <dt>id</dt><dd><code>{s.id}</code></dd>
        <dt>folder</dt><dd>{s.cwd}{s.cwd_exists ? "" : " (gone)"}</dd>
        {s.project && <><dt>project</dt><dd>{s.project}</dd></>}
        {s.agent && <><dt>agent</dt><dd>troupe's {s.agent.agent} ({s.agent.project})</dd></>}
        <dt>messages</dt><dd>{s.messages}{s.messages_partial ? "+" : ""}</dd>
        <dt>last activity</dt><dd>{s.last ? `${new Date(s.last).toLocaleString()} (${ago(Date.parse(s.last))})` : "?"}</dd>
        {s.model && <><dt>model</dt><dd>{s.model}</dd></>}
        {s.pids?.length ? <><dt>process</dt><dd>{s.pids.join(", ")}</dd></> : null}
        {s.doubt && <><dt>live?</dt><dd>{s.doubt}</dd></>}
        {s.held_by && <><dt>held by</dt><dd>{s.held_by}</dd></>}
        {s.skipped_lines ? <><dt>skipped</dt><dd>{s.skipped_lines} line(s) not understood</dd></> : null}
      </dl>
      <h4>In your terminal</h4>
      {s.live ? (
        <p class="note" id="resume-refused">This session is live{s.pids?.length ? ` (pid ${s.pids.join(", ")})` : ""}: it can be observed (below) or forked into a new session, never resumed — two processes writing one conversation would corrupt it. Fork it:</p>
      ) : (
        <>
          <p class="note">Resume it (continues this conversation; troupe holds it while the resume runs):</p>
          <Copy id="cmd-resume" text={`troupe resume ${s.id}`} />
          <p class="note">or fork it (a new conversation that starts from this one):</p>
        </>
      )}
      <Copy id="cmd-fork" text={`troupe fork ${s.id}`} />
      <h4>Hand off to an agent</h4>
      {!claudeAgents.length ? <p class="note">This project has no Claude agent to hand the session to.</p> : s.live ? (
        <p class="note" id="handoff-refused">A live session cannot be handed off: end it first, or fork it.</p>
      ) : (
        <form id="handoff" onSubmit={handOff}>
          <select id="handoff-agent" aria-label="agent" value={to || claudeAgents[0].name} onChange={(e) => setTo((e.target as HTMLSelectElement).value)}>
            {claudeAgents.map((x) => <option key={x.name} value={x.name}>{x.name}</option>)}
          </select>
          <button type="submit">Hand off</button>
        </form>
      )}
      {handoff && <p id="handoff-result" class={handoff.ok ? "note" : "err"} role="status">{handoff.text}</p>}
      <h4>Transcript</h4>
      <Transcript key={s.id} s={s} />
    </article>
  );
}

function SessionsView({ arg }: { arg: string }) {
  useApp();
  const [q, setQ] = useState("");
  const [liveOnly, setLiveOnly] = useState(false);
  const [list, setList] = useState<SessionList | null>(null);
  const [err, setErr] = useState("");
  const seq = useRef(0);

  async function load(query = q, live = liveOnly) {
    const n = ++seq.current;
    try {
      const r = await call<SessionList>("GET", `/api/claude-sessions?limit=200${query ? `&search=${enc(query)}` : ""}${live ? "&live=1" : ""}`);
      if (n === seq.current) { setList(r); setErr(""); }
    } catch (e) { if (n === seq.current) setErr((e as Error).message); }
  }
  // Search as the person types (a short pause), and on Enter.
  useEffect(() => { const t = setTimeout(() => load(q, liveOnly), 250); return () => clearTimeout(t); }, [q, liveOnly]);
  // Liveness changes without an event: the list is read again every 10 s
  // while the view is open and the page visible.
  useEffect(() => {
    const t = setInterval(() => { if (!document.hidden) load(q, liveOnly); }, 10000);
    return () => clearInterval(t);
  }, [q, liveOnly]);

  return (
    <section id="sessions" aria-label="Claude sessions">
      <form id="sessions-search" onSubmit={(e) => { e.preventDefault(); load(); }}>
        <input id="sessions-q" type="search" value={q} placeholder="search title, first prompt, folder, id" aria-label="search sessions"
          onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
        <label><input id="sessions-live" type="checkbox" checked={liveOnly} onChange={(e) => setLiveOnly((e.target as HTMLInputElement).checked)} /> live only</label>
      </form>
      {err && <p class="err" role="alert">{err}</p>}
      {list?.registry_unreadable?.length ? <p class="note">Claude's registry files {list.registry_unreadable.join(", ")} could not be read: a session may show dead while it runs.</p> : null}
      <div class="memory-cols">
        <div>
          <p class="note" id="sessions-count">{list ? `${list.sessions.length} of ${list.total} session(s)` : "loading…"}</p>
          <ul id="session-list" class="notes">
            {list?.sessions.map((s) => (
              <li key={s.id} data-session={s.id} data-live={s.live ? "1" : "0"} class={s.id === arg ? "selected" : ""}>
                <a href="#" onClick={(e) => { e.preventDefault(); navigate({ view: "sessions", arg: s.id }); }}>{s.title || s.first_prompt || s.id}</a>
                <div class="note"><span class={s.live ? "live" : "dead"}>{liveLabel(s)}</span>
                  {s.project ? ` · ${s.project}` : ""} · {s.messages}{s.messages_partial ? "+" : ""} msg · {s.last ? ago(Date.parse(s.last)) : "?"}</div>
                <div class="note cwd">{s.cwd}</div>
              </li>
            ))}
            {list && !list.sessions.length && <li class="note">{q || liveOnly ? "No session matches." : "No Claude Code session on this machine."}</li>}
          </ul>
        </div>
        {arg && <Detail id={arg} refresh={() => load()} />}
      </div>
    </section>
  );
}

registerView({ id: "sessions", label: "Claude sessions", component: SessionsView, inNav: true });
void app;
