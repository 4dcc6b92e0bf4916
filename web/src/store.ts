// The UI's state and the actions that change it. Components read `app` and
// re-render on `changed()`, which is coalesced to one render per frame: a
// burst of events costs one render, not one per event.
import { useEffect, useState } from "preact/hooks";
import {
  Agent, AgentLog, ApiError, CheckResult, Checkpoint, JournalEvent, Message, MessagePage, PendingTeam, Permission, Project, Request, Status, Task, Turn, Usage,
  agentPath, call, enc, projectPath,
} from "./api";
import { CheckpointDiff, CheckpointsResponse, RewindResponse, rewoundLine } from "./checkpoints";
import { Conn, Feed, FeedEvent } from "./feed";
import { Route, parseRoute, routeHash } from "./router";

// ---- transcript model -------------------------------------------------

export type Item =
  | { kind: "text"; text: string; cut?: boolean }
  | { kind: "thinking"; text: string; cut?: boolean }
  | { kind: "notice"; text: string; cut?: boolean }
  | { kind: "checkpoint"; text: string; cut?: boolean }
  | { kind: "tool"; id: string; name: string; input: string; output?: string; isError?: boolean; done: boolean; cut?: boolean }
  | { kind: "permission"; id: string; tool: string; title?: string; input: string; state: string; allow?: boolean; reason?: string };

export interface TurnView {
  turn: string; startedAt: string; from: string[]; asked: string; items: Item[];
  ended: boolean; error?: string; usage?: Usage; durationMs?: number; complete: boolean;
}

const maxTurns = 20;       // per agent, in memory
const maxItems = 400;      // per turn, in memory: the journal has the rest
export const maxShown = 1000; // messages kept while following the end

export interface Card { key: number; project: string; to: string; text: string; state: string; answer?: string; error?: string; id?: string }

export interface App {
  conn: Conn;
  status: Status | null;
  error: string;
  projects: Project[];
  route: Route;
  agents: Agent[];
  // conversation of route.project (filtered by convAgent when set)
  conv: { key: string; items: Message[]; before: number; loading: boolean };
  convAgent: string;
  cards: Card[];
  // Transcripts of route.project's agents, by agent name. These maps by
  // agent name hold one project's agents only (C1): selectProject clears
  // them, and onEvent fills them with events of route.project only.
  turns: Map<string, TurnView[]>;
  logBefore: Map<string, number>;
  lastActivity: Map<string, number>;
  checkpoints: Map<string, Checkpoints>; // read when the agent's view opens
  checks: Map<string, CheckResult[]>; // its check results, newest first, read likewise
  tasks: Task[];
  taskOutput: Map<string, string>;
  permissions: Permission[];
  troubled: Agent[]; // failed, blocked or waiting agents of every project
  teamChanges: PendingTeam[]; // held team changes of every project, not rejected
  attemptsRev: number; // counts route.project's attempt.changed events: the Attempts view reads again
}

export const app: App = {
  conn: "connecting", status: null, error: "", projects: [], route: parseRoute(location.hash), agents: [],
  conv: { key: "", items: [], before: 0, loading: false }, convAgent: "", cards: [],
  turns: new Map(), logBefore: new Map(), lastActivity: new Map(), checkpoints: new Map(), checks: new Map(), tasks: [], taskOutput: new Map(),
  permissions: [], troubled: [], teamChanges: [], attemptsRev: 0,
};

// ---- rendering --------------------------------------------------------

const subs = new Set<() => void>();
let marked = false;
let frame = 0;
export function changed() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    for (const f of subs) f();
    // The first render with the state read: what the load benchmark times.
    if (ready && !marked) { marked = true; queueMicrotask(() => performance.mark("troupe:ready")); } // after Preact's render (a microtask queued before)
  });
}
export function useApp(): App {
  const [, set] = useState(0);
  useEffect(() => {
    const f = () => set((n) => n + 1);
    subs.add(f);
    return () => { subs.delete(f); };
  }, []);
  return app;
}

function fail(e: unknown) {
  app.error = e instanceof Error ? e.message : String(e);
  changed();
}
export function clearError() { app.error = ""; changed(); }

// ---- navigation -------------------------------------------------------

export function navigate(r: Partial<Route>) {
  const next = { ...app.route, ...r };
  location.hash = routeHash(next);
}

function onHash() {
  const prev = app.route;
  app.route = parseRoute(location.hash);
  if (!app.route.project && app.projects.length) {
    app.route.project = app.projects[0].id;
    history.replaceState(null, "", routeHash(app.route));
  }
  if (prev.project !== app.route.project) selectProject();
  changed(); // the agent view reads its journal itself, once per agent
}

// ---- loading ----------------------------------------------------------

let feed: Feed;

export async function boot() {
  window.addEventListener("hashchange", onHash);
  feed = new Feed(() => app.route.project, onEvent, () => { reloadAll(); }, (c) => {
    app.conn = c;
    if (c === "reconnecting") {
      // A daemon that answers but refuses the session (expired, or a new
      // state dir) will not take the page back: say what to do.
      call<Status>("GET", "/api/status").catch((e) => {
        if (e instanceof ApiError && e.status === 401) fail(e);
      });
    }
    changed();
  });
  await reloadAll();
  feed.start();
  setInterval(tick, 1000);
}

/** reloadAll re-reads everything (at start, and after a "reset" event).
 * The project named in the URL is read at once, beside the project list. */
export async function reloadAll() {
  try {
    const p = app.route.project;
    const early = p ? Promise.all([loadAgents(), loadNewest(), loadTasks()]) : null;
    const [st] = await Promise.all([call<Status>("GET", "/api/status"), loadProjects()]);
    app.status = st;
    if (!feed.last) feed.last = st.last_event; // follow from now: the state read is current
    if (!early || p !== app.route.project) await Promise.all([loadAgents(), loadNewest(), loadTasks()]);
    else await early;
    changed();
    ready = true;
    performance.mark("troupe:data");
    app.error = ""; // before the journal's load, whose own failure stays shown
    await Promise.all([loadNeeds(), app.route.view === "agent" && app.route.arg ? loadLog(app.route.arg) : null]);
  } catch (e) { fail(e); }
  changed();
}
let ready = false;

async function loadProjects() {
  app.projects = await call<Project[]>("GET", "/api/projects");
  // The URL as it is now: it may have changed while the list was read.
  const r = parseRoute(location.hash);
  if ((!r.project || !app.projects.some((p) => p.id === r.project)) && app.projects.length) {
    app.route = { ...r, project: app.projects[0].id };
    history.replaceState(null, "", routeHash(app.route));
  }
}

function selectProject() {
  app.agents = []; app.tasks = []; app.turns = new Map(); app.logBefore = new Map(); app.lastActivity = new Map();
  app.checkpoints = new Map(); cpLatest = new Map(); app.checks = new Map();
  app.taskOutput = new Map(); app.convAgent = "";
  app.conv = { key: "", items: [], before: 0, loading: false };
  feed.restart();
  reloadAll();
}

async function loadAgents() {
  const p = app.route.project;
  if (!p) { app.agents = []; return; }
  const as = await call<Agent[]>("GET", `${projectPath(p)}/agents`);
  if (p === app.route.project) app.agents = as;
}

export async function loadTasks() {
  const p = app.route.project;
  if (!p) return;
  const ts = await call<Task[]>("GET", `${projectPath(p)}/tasks`);
  if (p !== app.route.project) return;
  ts.sort((a, b) => b.started_at.localeCompare(a.started_at));
  // A task seen running that has ended: read its output's end once more.
  for (const t of ts) {
    const was = app.tasks.find((x) => x.id === t.id);
    if (was && was.state === "running" && t.state !== "running" && app.taskOutput.has(t.id)) loadTaskOutput(t.id).catch(fail);
  }
  app.tasks = ts;
  changed();
}

export async function loadTaskOutput(id: string) {
  const p = app.route.project;
  const o = await call<{ output: string }>("GET", `${projectPath(p)}/tasks/${enc(id)}/output?max_bytes=16384`);
  if (p === app.route.project) { app.taskOutput.set(id, o.output); changed(); }
}

export async function killTask(id: string) {
  try { await call("POST", `${projectPath(app.route.project)}/tasks/${enc(id)}/kill`); await loadTasks(); } catch (e) { fail(e); }
}

export async function runTask(command: string): Promise<boolean> {
  try {
    await call("POST", `${projectPath(app.route.project)}/tasks`, { command });
    await loadTasks();
    return true;
  } catch (e) { fail(e); return false; }
}

export async function loadNeeds() {
  const perms = await call<Permission[]>("GET", "/api/permissions").catch((e) => {
    if (e instanceof ApiError && e.status === 503) return [] as Permission[];
    throw e;
  });
  const troubled: Agent[] = [];
  await Promise.all(app.projects.map(async (p) => {
    const as = await call<Agent[]>("GET", `${projectPath(p.id)}/agents`).catch(() => [] as Agent[]);
    for (const a of as) if (a.state === "failed" || a.state === "blocked" || a.state === "waiting" || a.state === "limited" || a.state === "unreachable") troubled.push(a);
  }));
  const teams = await call<PendingTeam[]>("GET", "/api/team-changes").catch(() => [] as PendingTeam[]);
  app.permissions = perms;
  app.troubled = troubled;
  app.teamChanges = teams;
  changed();
}

export function needsCount() {
  return app.permissions.filter((p) => p.state === "pending").length + app.troubled.filter((a) => a.state !== "waiting").length +
    app.teamChanges.length;
}

/** decideTeam approves or rejects the held team change the person saw (its digest). */
export async function decideTeam(project: string, digest: string, approve: boolean) {
  try {
    await call("POST", `${projectPath(project)}/team/${approve ? "approve" : "reject"}`, { digest });
  } catch (e) { fail(e); }
  loadNeeds().catch(fail);
}

// ---- conversation -----------------------------------------------------

function convQuery(extra: string) {
  const q = new URLSearchParams(extra);
  if (app.convAgent) q.set("agent", app.convAgent);
  const s = q.toString();
  return `${projectPath(app.route.project)}/messages${s ? "?" + s : ""}`;
}

function convKey() { return app.route.project + "\u0000" + app.convAgent; }

function putMessages(ms: Message[]) {
  const items = app.conv.items;
  for (const m of ms) {
    // the common case: appending after the last
    if (!items.length || m.id > items[items.length - 1].id) { items.push(m); continue; }
    let lo = 0, hi = items.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (items[mid].id < m.id) lo = mid + 1; else hi = mid; }
    if (items[lo] && items[lo].id === m.id) items[lo] = m; else items.splice(lo, 0, m);
  }
}

/** trimConversation keeps at most maxShown messages while following the end. */
export function trimConversation() {
  const items = app.conv.items;
  if (items.length > maxShown) {
    items.splice(0, items.length - maxShown);
    app.conv.before = items[0].id;
  }
}

export async function loadNewest() {
  const key = convKey();
  app.conv = { key, items: [], before: 0, loading: true };
  if (!app.route.project) return;
  const page = await call<MessagePage>("GET", convQuery(""));
  if (app.conv.key !== key) return;
  putMessages(page.messages);
  app.conv.before = page.before || 0;
  app.conv.loading = false;
  changed();
}

export async function loadOlder() {
  const key = app.conv.key;
  if (!app.conv.before) return;
  try {
    const page = await call<MessagePage>("GET", convQuery(`before=${app.conv.before}`));
    if (app.conv.key !== key) return;
    putMessages(page.messages);
    app.conv.before = page.before || 0;
    changed();
  } catch (e) { fail(e); }
}

/** refreshMessages reads what changed near the end (?after=). */
let refreshing = false, refreshAgain = false;
async function refreshMessages() {
  if (refreshing) { refreshAgain = true; return; }
  refreshing = true;
  try {
    do {
      refreshAgain = false;
      const key = app.conv.key;
      const items = app.conv.items;
      let after = items.length ? items[Math.max(0, items.length - 50)].id - 1 : 0;
      for (let i = 0; i < 100; i++) { // bounded: 100 pages of 200
        const page = await call<MessagePage>("GET", convQuery(`after=${after}&limit=200`));
        if (app.conv.key !== key) break;
        putMessages(page.messages);
        changed();
        if (!page.after) break;
        after = page.after;
      }
    } while (refreshAgain);
  } catch (e) { fail(e); }
  refreshing = false;
}

export function setConvAgent(a: string) {
  app.convAgent = a;
  loadNewest().catch(fail);
  changed();
}

// ---- talking ----------------------------------------------------------

let cardKey = 0;
const maxCards = 50; // the answer cards kept, oldest dropped first
const recipientKey = (p: string) => `troupe.to.${p}`;
export function recipient(): string {
  const saved = localStorage.getItem(recipientKey(app.route.project)) || "";
  if (app.agents.some((a) => a.name === saved)) return saved;
  return app.agents[0]?.name || "";
}
export function setRecipient(a: string) { localStorage.setItem(recipientKey(app.route.project), a); changed(); }

/** talk asks or tells; it resolves false (the typed text stays) when the daemon refused. */
export async function talk(kind: "ask" | "send", to: string, text: string): Promise<boolean> {
  const project = app.route.project;
  if (kind === "send") {
    try {
      await call("POST", `${agentPath(project, to)}/send`, { text });
      return true;
    } catch (e) { fail(e); return false; }
  }
  const card: Card = { key: ++cardKey, project, to, text, state: "sending" };
  try {
    // A short wait: the answer comes with request.done (or the polling below).
    const r = await call<Request>("POST", `${agentPath(project, to)}/ask`, { text, wait_seconds: 1 });
    app.cards.push(card);
    if (app.cards.length > maxCards) app.cards.splice(0, app.cards.length - maxCards);
    applyRequest(card, r);
    changed();
    if (card.state === "pending") awaitCard(card);
    return true;
  } catch (e) { fail(e); return false; }
}

function applyRequest(card: Card, r: Request) {
  card.id = r.id;
  card.state = r.state;
  card.answer = r.answer;
  card.error = r.error;
}

async function awaitCard(card: Card) {
  while (card.state === "pending") {
    try {
      const r = await call<Request>("GET", `${projectPath(card.project)}/requests/${enc(card.id!)}?wait_seconds=25`);
      applyRequest(card, r);
      changed();
    } catch {
      await new Promise((res) => setTimeout(res, 2000)); // the daemon restarts, say
    }
  }
}

export function dismissCard(key: number) { app.cards = app.cards.filter((c) => c.key !== key); changed(); }

// ---- agents -----------------------------------------------------------

export async function control(agent: string, what: "interrupt" | "restart" | "reset") {
  try { await call("POST", `${agentPath(app.route.project, agent)}/${what}`); } catch (e) { fail(e); }
  if (what === "reset") refreshCheckpoints(agent); // a reset leaves a checkpoint
}

export async function decide(id: string, allow: boolean) {
  try {
    await call("POST", `/api/permissions/${enc(id)}/${allow ? "allow" : "deny"}`, allow ? undefined : { reason: "denied in the web UI" });
  } catch (e) { fail(e); }
  loadNeeds().catch(fail);
}

function turnFromJournal(t: Turn): TurnView {
  const v: TurnView = {
    turn: t.turn, startedAt: t.started_at, from: t.messages.map((m) => m.from), asked: t.messages.map((m) => m.text).join("\n\n"),
    items: [], ended: !!t.ended_at, error: t.error, usage: t.usage, durationMs: t.duration_ms, complete: true,
  };
  for (const e of t.events) addJournalEvent(v, e);
  return v;
}

function addJournalEvent(v: TurnView, e: JournalEvent) {
  switch (e.kind) {
    case "output": addText(v, "text", e.text || "", e.cut); break;
    case "thinking": addText(v, "thinking", e.text || "", e.cut); break;
    case "tool_call": addItem(v, { kind: "tool", id: e.tool!.id, name: e.tool!.name || "", input: e.tool!.input || "", done: false, cut: e.cut }); break;
    case "tool_result": toolResult(v, e.tool!.id, e.tool!.output || "", !!e.tool!.is_error); break;
    case "usage": v.usage = e.usage; break;
    case "notice": addItem(v, { kind: "notice", text: e.text || "", cut: e.cut }); break;
    case "checkpoint": addItem(v, { kind: "checkpoint", text: e.text || "", cut: e.cut }); break;
    case "permission": {
      const p = e.permission!;
      putPermission(v, { kind: "permission", id: p.id, tool: p.tool, title: p.title, input: p.input || "", state: p.allow ? "allowed" : "denied", allow: p.allow, reason: p.reason });
    }
  }
}

function addItem(v: TurnView, it: Item) {
  v.items.push(it);
  if (v.items.length > maxItems) { v.items.splice(0, v.items.length - maxItems); v.complete = false; }
}
function addText(v: TurnView, kind: "text" | "thinking", text: string, cut?: boolean) {
  const last = v.items[v.items.length - 1];
  if (last && last.kind === kind && last.text.length < 64 << 10) { last.text += text; last.cut = last.cut || cut; return; }
  addItem(v, { kind, text, cut });
}
function toolResult(v: TurnView, id: string, output: string, isError: boolean) {
  const t = v.items.find((i) => i.kind === "tool" && i.id === id) as Extract<Item, { kind: "tool" }> | undefined;
  if (t) { t.output = output; t.isError = isError; t.done = true; }
  else addItem(v, { kind: "tool", id, name: "?", input: "", output, isError, done: true });
}
function putPermission(v: TurnView, p: Extract<Item, { kind: "permission" }>) {
  const i = v.items.findIndex((x) => x.kind === "permission" && x.id === p.id);
  if (i >= 0) v.items[i] = p; else addItem(v, p);
}

/** loadLog reads an agent's recent turns from the journal. */
export async function loadLog(agent: string, older = false) {
  const p = app.route.project;
  const before = older ? app.logBefore.get(agent) || 0 : 0;
  if (older && !before) return;
  try {
    const log = await call<AgentLog>("GET", `${agentPath(p, agent)}/log?limit=10${before ? `&before=${before}` : ""}`);
    if (p !== app.route.project) return;
    const have = app.turns.get(agent) || [];
    const byId = new Map(have.map((t) => [t.turn, t]));
    for (const t of log.turns) {
      const live = byId.get(t.turn);
      // A turn followed live from its start is as complete as the journal's
      // (which lags the live feed by a moment): keep it.
      if (live && live.complete && !(t.ended_at && !live.ended)) continue;
      byId.set(t.turn, turnFromJournal(t));
    }
    const all = [...byId.values()].sort((a, b) => a.startedAt.localeCompare(b.startedAt));
    app.turns.set(agent, older ? all : all.slice(-maxTurns));
    app.logBefore.set(agent, log.before || 0);
    const last = all[all.length - 1];
    if (last && !app.lastActivity.has(agent)) app.lastActivity.set(agent, Date.parse(last.startedAt));
    changed();
  } catch (e) { fail(e); }
}

// ---- checkpoints (C18) ------------------------------------------------

/** Checkpoints are an agent's checkpoints as last read: list oldest first,
 * unavailable why it has none, error why they could not be read. */
export interface Checkpoints { list: Checkpoint[]; unavailable?: string; error?: string }

// The newest read of each agent's checkpoints (by number, cpReads
// counting them): an older read answering late is dropped.
let cpReads = 0;
let cpLatest = new Map<string, number>();

/** loadCheckpoints reads agent's checkpoints (its view opens, a turn of
 * it ended, a rewind). */
export async function loadCheckpoints(agent: string) {
  const p = app.route.project;
  if (!p) return;
  const n = ++cpReads;
  cpLatest.set(agent, n);
  let cs: Checkpoints;
  try {
    const r = await call<CheckpointsResponse>("GET", `${agentPath(p, agent)}/checkpoints`);
    cs = { list: r.checkpoints || [], unavailable: r.unavailable };
  } catch (e) {
    cs = { list: app.checkpoints.get(agent)?.list || [], error: (e as Error).message };
  }
  if (p !== app.route.project || cpLatest.get(agent) !== n) return;
  app.checkpoints.set(agent, cs);
  changed();
}

/** loadChecks reads agent's check results (its view opens, a check of it
 * ended). */
export async function loadChecks(agent: string) {
  const p = app.route.project;
  if (!p) return;
  try {
    const rs = await call<CheckResult[]>("GET", `${projectPath(p)}/checks?agent=${enc(agent)}`);
    if (p !== app.route.project) return;
    app.checks.set(agent, rs || []);
    changed();
  } catch (e) { fail(e); }
}

/** checkpointDiff reads what checkpoint seq of agent changed: git's
 * --stat (stat), else the patch. */
export function checkpointDiff(agent: string, seq: number, stat: boolean): Promise<CheckpointDiff> {
  return call<CheckpointDiff>("GET", `${agentPath(app.route.project, agent)}/checkpoints/${seq}/diff${stat ? "?stat=1" : ""}`);
}

/** rewind puts agent's files back as they were at checkpoint seq (the
 * daemon checkpoints the present first) and says what happened, or why
 * the daemon refused (ok false: the agent is in a turn, say). */
export async function rewind(agent: string, seq: number): Promise<{ ok: boolean; text: string }> {
  let out: { ok: boolean; text: string };
  try {
    const r = await call<RewindResponse>("POST", `${agentPath(app.route.project, agent)}/rewind`, { seq });
    out = { ok: true, text: rewoundLine(r) };
  } catch (e) {
    out = { ok: false, text: (e as Error).message };
  }
  await loadCheckpoints(agent);
  return out;
}

function liveTurn(agent: string, turn: string, time: string): TurnView {
  let ts = app.turns.get(agent);
  if (!ts) { ts = []; app.turns.set(agent, ts); }
  let v = ts.find((t) => t.turn === turn);
  if (!v) {
    v = { turn, startedAt: time, from: [], asked: "", items: [], ended: false, complete: false };
    ts.push(v);
    if (ts.length > maxTurns) ts.splice(0, ts.length - maxTurns);
  }
  return v;
}

// ---- events -----------------------------------------------------------

let needsTimer = 0, msgTimer = 0, taskTimer = 0, agentTimer = 0, doingTimer = 0, checkpointTimer = 0, checkTimer = 0;
const soon = (t: number, f: () => unknown, ms: number) => t || window.setTimeout(f, ms);

function onEvent(e: FeedEvent) {
  const here = e.project === app.route.project;
  const d = e.data || {};
  if (here && e.agent) app.lastActivity.set(e.agent, Date.parse(e.time));
  switch (e.type) {
    case "agent.state":
      if (here) {
        const a = app.agents.find((x) => x.name === e.agent);
        if (a) { a.state = d.state; a.reason = d.reason; }
        // A reset, a rewind or a worktree reset (from the CLI, say) leaves a
        // checkpoint and moves the agent's state.
        if (e.agent) refreshCheckpoints(e.agent);
      }
      needsTimer = soon(needsTimer, () => { needsTimer = 0; loadNeeds().catch(fail); }, 250);
      break;
    case "agent.permission":
      if (here && e.agent) putPermission(liveTurn(e.agent, d.turn, e.time),
        { kind: "permission", id: d.id, tool: d.tool, title: d.title, input: d.input, state: d.state, allow: d.allow, reason: d.reason });
      needsTimer = soon(needsTimer, () => { needsTimer = 0; loadNeeds().catch(fail); }, 100);
      break;
    case "turn.started":
      if (here && e.agent) {
        const v = liveTurn(e.agent, d.turn, e.time);
        v.complete = v.items.length === 0;
        // What the turn answers: its messages, when the conversation shows them.
        const ms = (d.messages as number[] || []).map((id) => app.conv.items.find((m) => m.id === id)).filter((m): m is Message => !!m);
        v.from = ms.map((m) => m.from);
        v.asked = ms.map((m) => m.text).join("\n\n");
      }
      msgTimer = soon(msgTimer, () => { msgTimer = 0; refreshMessages(); }, 100);
      break;
    case "turn.ended":
      if (here && e.agent) { const v = liveTurn(e.agent, d.turn, e.time); v.ended = true; v.error = d.error || undefined; v.durationMs = Date.parse(e.time) - Date.parse(v.startedAt); }
      // The turn's checkpoint is made before its end is published.
      if (here && e.agent) refreshCheckpoints(e.agent);
      msgTimer = soon(msgTimer, () => { msgTimer = 0; refreshMessages(); }, 100);
      break;
    // An agent's activity comes in its log's words: one journal event.
    case "agent.output": case "agent.thinking": case "agent.tool_call": case "agent.tool_result": case "agent.usage": case "agent.notice":
      if (here && e.agent && d.turn) addJournalEvent(liveTurn(e.agent, d.turn, e.time), d as JournalEvent);
      // What the agent runs (its engine's tool calls in flight) is in its
      // line of the agents' list: read again when a call starts or ends.
      if (here && (e.type === "agent.tool_call" || e.type === "agent.tool_result")) {
        doingTimer = soon(doingTimer, () => { doingTimer = 0; loadAgents().then(changed, fail); }, 250);
      }
      break;
    case "message.queued":
      if (!here) break;
      if (d.id && (!app.convAgent || d.from === app.convAgent || d.to === app.convAgent)) {
        if (!app.conv.items.length || d.id > app.conv.items[app.conv.items.length - 1].id || app.conv.items.some((m) => m.id === d.id)) putMessages([d as Message]);
      } else if (!d.id) msgTimer = soon(msgTimer, () => { msgTimer = 0; refreshMessages(); }, 100);
      if (d.kind === "task") taskTimer = soon(taskTimer, () => { taskTimer = 0; loadTasks().catch(fail); }, 100);
      break;
    case "request.done": {
      const c = app.cards.find((x) => x.id === d.id);
      if (c) { c.state = d.state; c.answer = d.answer; c.error = d.error; }
      msgTimer = soon(msgTimer, () => { msgTimer = 0; refreshMessages(); }, 100);
      break;
    }
    case "inbox.expired":
      msgTimer = soon(msgTimer, () => { msgTimer = 0; refreshMessages(); }, 100);
      break;
    case "check.ended":
      if (here && e.agent && e.agent === shownAgent()) checkTimer = soon(checkTimer, () => { checkTimer = 0; const a = shownAgent(); if (a) loadChecks(a); }, 50);
      break;
    case "attempt.changed":
      if (here) app.attemptsRev++;
      break;
    case "task.started": case "task.ended":
      if (here) taskTimer = soon(taskTimer, () => { taskTimer = 0; loadTasks().catch(fail); }, 50);
      break;
    case "team.held": case "team.decided":
      needsTimer = soon(needsTimer, () => { needsTimer = 0; loadNeeds().catch(fail); }, 100);
      break;
    case "team.changed": case "project.removed": case "daemon.started":
      agentTimer = soon(agentTimer, async () => { agentTimer = 0; try { await loadProjects(); await loadAgents(); await loadNeeds(); } catch (err) { fail(err); } changed(); }, 100);
      break;
  }
  changed();
}

/** shownAgent is the agent whose view is open, "" when none. */
function shownAgent(): string { return app.route.view === "agent" ? app.route.arg : ""; }

/** refreshCheckpoints reads agent's checkpoints again soon, if its view is open. */
function refreshCheckpoints(agent: string) {
  if (agent !== shownAgent()) return;
  checkpointTimer = soon(checkpointTimer, () => { checkpointTimer = 0; const a = shownAgent(); if (a) loadCheckpoints(a); }, 150);
}

// tick re-renders the "N s ago" clocks and follows a running task's output.
function tick() {
  if (app.route.view === "agent") changed();
  // Starts and ends come as task.* events; the output has none: its tail
  // is read each second while the selected task runs.
  const sel = app.route.view === "tasks" && app.tasks.find((t) => t.id === app.route.arg);
  if (sel && sel.state === "running") loadTaskOutput(sel.id).catch(fail);
  if (app.route.view === "tasks" && app.tasks.some((t) => t.state === "running")) changed(); // the running times
}
