// troupe web UI: reads and drives the daemon's API with the session cookie
// of the login link, and follows /api/events to stay current.
"use strict";

let project = null; // the selected project's id

async function call(method, path, body) {
  const r = await fetch(path, {
    method, credentials: "same-origin",
    headers: body ? { "Content-Type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = r.status === 204 ? null : await r.json();
  if (!r.ok) throw new Error((data && data.error) || r.statusText);
  return data;
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "dataset") Object.assign(e.dataset, v); else e[k] = v;
  }
  for (const k of kids) e.append(k);
  return e;
}

async function refreshStatus() {
  const st = await call("GET", "/api/status");
  document.getElementById("status").textContent =
    `${st.version} · ${st.projects} project(s) · ${st.agents} agent(s)`;
}

async function refreshProjects() {
  const ps = await call("GET", "/api/projects");
  if (!project && ps.length) project = ps[0].id;
  const ul = document.getElementById("projects");
  ul.replaceChildren(...ps.map((p) => {
    const li = el("li", { title: p.path, className: p.id === project ? "selected" : "", dataset: { project: p.id } },
      `${p.name} (${p.agents})`);
    li.onclick = () => { project = p.id; refreshAll(); };
    return li;
  }));
  const cur = ps.find((p) => p.id === project);
  const te = document.getElementById("team-error");
  te.hidden = !(cur && cur.team_error);
  te.textContent = cur && cur.team_error ? cur.team_error : "";
}

async function refreshAgents() {
  const body = document.querySelector("#agents tbody");
  const to = document.getElementById("to");
  if (!project) { body.replaceChildren(); return; }
  const as = await call("GET", `/api/projects/${project}/agents`);
  body.replaceChildren(...as.map((a) => el("tr", { dataset: { agent: a.name } },
    el("td", {}, a.name), el("td", {}, a.engine),
    el("td", { className: "state state-" + a.state }, a.state + (a.reason ? ` (${a.reason})` : "")))));
  const chosen = to.value;
  to.replaceChildren(...as.map((a) => el("option", { value: a.name }, a.name)));
  if (chosen) to.value = chosen;
}

// The conversation shown: the newest page, the older pages asked for with
// the "load older" button, and what came since, kept in id order. It never
// reads the whole history: message.queued events carry their message, and
// the other changes (turns, answers, expiry) are read with ?after= from the
// oldest of the last 50 shown, page by page.
let conv = { project: null, items: new Map(), before: 0, last: 0 };
const maxShown = 1000; // while following the end; "load older" may show more

function messageItem(m) {
  return el("li", { dataset: { id: m.id, kind: m.kind } },
    el("div", { className: "meta" },
      `${m.from} → ${m.to} · ${m.kind} · ${m.state}${m.redelivered ? " (redelivered)" : ""}${m.reason ? ": " + m.reason : ""}`),
    el("div", { className: "text" }, m.text));
}

// putMessage shows m, or shows it anew when it is shown already.
function putMessage(m) {
  const ol = document.getElementById("messages");
  const li = messageItem(m);
  const old = conv.items.get(m.id);
  if (old) {
    old.replaceWith(li);
  } else if (m.id > conv.last) {
    const atEnd = ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 4;
    ol.append(li);
    conv.last = m.id;
    if (atEnd) {
      ol.scrollTop = ol.scrollHeight;
      while (conv.items.size >= maxShown) { // a page left open for days stays small
        const first = ol.firstElementChild;
        conv.items.delete(Number(first.dataset.id));
        first.remove();
        conv.before = Number(ol.firstElementChild.dataset.id);
      }
      showOlder();
    }
  } else {
    const next = [...ol.children].find((c) => Number(c.dataset.id) > m.id);
    ol.insertBefore(li, next || null);
  }
  conv.items.set(m.id, li);
}

function showOlder() {
  document.getElementById("older").hidden = !conv.before;
}

// loadNewest shows the newest page of the selected project's conversation.
async function loadNewest() {
  const ol = document.getElementById("messages");
  conv = { project, items: new Map(), before: 0, last: 0 };
  ol.replaceChildren();
  showOlder();
  if (!project) return;
  const mine = conv;
  const page = await call("GET", `/api/projects/${project}/messages`);
  if (conv !== mine) return;
  page.messages.forEach(putMessage);
  conv.before = page.before || 0;
  showOlder();
  ol.scrollTop = ol.scrollHeight;
}

// loadOlder shows the page before the oldest one shown.
async function loadOlder() {
  if (!conv.before) return;
  const ol = document.getElementById("messages");
  const mine = conv;
  const page = await call("GET", `/api/projects/${project}/messages?before=${conv.before}`);
  if (conv !== mine) return;
  const height = ol.scrollHeight;
  page.messages.forEach(putMessage);
  conv.before = page.before || 0;
  showOlder();
  ol.scrollTop += ol.scrollHeight - height;
}

// refreshMessages reads what changed near the end: messages stored without
// an event of their own and the states of the last 50 shown.
async function refreshMessages() {
  if (!project || conv.project !== project) return loadNewest();
  const ids = [...conv.items.keys()].sort((a, b) => a - b);
  let after = ids.length ? ids[Math.max(0, ids.length - 50)] - 1 : conv.last;
  const mine = conv;
  for (;;) {
    const page = await call("GET", `/api/projects/${project}/messages?after=${after}&limit=200`);
    if (conv !== mine) return;
    page.messages.forEach(putMessage);
    if (!page.after) return;
    after = page.after;
  }
}

// onQueued shows the message a message.queued event carries; an event
// whose data was cut (a long message) is read with the next refresh.
function onQueued(d) {
  if (d.project !== project || conv.project !== project) return false;
  if (!d.data || !d.data.id) return true;
  putMessage(d.data);
  return false;
}

async function refreshTasks() {
  const body = document.querySelector("#tasks tbody");
  if (!project) { body.replaceChildren(); return; }
  const ts = await call("GET", `/api/projects/${project}/tasks`);
  body.replaceChildren(...ts.map((t) => el("tr", { dataset: { task: t.id } },
    el("td", {}, t.id), el("td", {}, t.owner),
    el("td", {}, t.state + (t.state !== "running" ? ` (${t.exit_code})` : "")),
    el("td", {}, t.command))));
}

let pending = null; // coalesces refreshes triggered by bursts of events
let pendingMessages = false; // the coalesced refresh reads the conversation too
function refreshAll(messages = true) {
  pendingMessages = pendingMessages || messages;
  if (pending) return;
  pending = setTimeout(async () => {
    pending = null;
    const withMessages = pendingMessages;
    pendingMessages = false;
    try {
      await refreshStatus();
      await refreshProjects();
      await Promise.all([refreshAgents(), withMessages ? refreshMessages() : null, refreshTasks()]);
    } catch (e) {
      document.getElementById("status").textContent = e.message;
    }
  }, 50);
}

async function talk(kind) {
  const to = document.getElementById("to").value;
  const input = document.getElementById("text");
  const answer = document.getElementById("answer");
  const text = input.value.trim();
  if (!project || !to || !text) return;
  input.value = "";
  answer.className = "";
  try {
    if (kind === "ask") {
      answer.textContent = `${to} is working…`;
      const r = await call("POST", `/api/projects/${project}/agents/${to}/ask`, { text });
      answer.textContent = r.state === "answered" ? r.answer : `${r.state}: ${r.error || r.id}`;
      if (r.state !== "answered") answer.className = "err";
    } else {
      const m = await call("POST", `/api/projects/${project}/agents/${to}/send`, { text });
      answer.textContent = `queued message ${m.id} for ${to}`;
    }
  } catch (e) {
    answer.textContent = e.message;
    answer.className = "err";
  }
  refreshAll();
}

function follow() {
  const log = document.getElementById("events");
  const src = new EventSource("/api/events");
  const show = (ev) => {
    const d = JSON.parse(ev.data);
    log.prepend(el("li", {}, `#${d.seq} ${d.time.slice(11, 19)} ${d.type} ${d.agent || ""}`));
    while (log.children.length > 200) log.lastChild.remove();
    if (d.type === "agent.output") return;
    if (d.type === "message.queued") refreshAll(onQueued(d));
    else refreshAll(["turn.started", "turn.ended", "request.done", "inbox.expired"].includes(d.type));
  };
  for (const t of ["team.changed", "project.removed", "daemon.started", "agent.state", "agent.output",
    "message.queued", "turn.started", "turn.ended", "request.done", "inbox.expired"]) {
    src.addEventListener(t, show);
  }
  src.addEventListener("reset", () => { conv.project = null; refreshAll(); });
}

document.getElementById("composer").addEventListener("submit", (e) => { e.preventDefault(); talk("ask"); });
document.getElementById("send").addEventListener("click", () => talk("send"));
document.getElementById("older").addEventListener("click", () => loadOlder().catch((e) => {
  document.getElementById("status").textContent = e.message;
}));
refreshAll();
follow();
