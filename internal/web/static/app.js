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

async function refreshMessages() {
  const ol = document.getElementById("messages");
  if (!project) { ol.replaceChildren(); return; }
  const ms = await call("GET", `/api/projects/${project}/messages`);
  ol.replaceChildren(...ms.slice(-200).map((m) => el("li", { dataset: { id: m.id, kind: m.kind } },
    el("div", { className: "meta" },
      `${m.from} → ${m.to} · ${m.kind} · ${m.state}${m.redelivered ? " (redelivered)" : ""}${m.reason ? ": " + m.reason : ""}`),
    el("div", { className: "text" }, m.text))));
  ol.scrollTop = ol.scrollHeight;
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
function refreshAll() {
  if (pending) return;
  pending = setTimeout(async () => {
    pending = null;
    try {
      await refreshStatus();
      await refreshProjects();
      await Promise.all([refreshAgents(), refreshMessages(), refreshTasks()]);
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
    if (d.type !== "agent.output") refreshAll();
  };
  for (const t of ["team.changed", "project.removed", "daemon.started", "agent.state", "agent.output",
    "message.queued", "turn.started", "turn.ended", "request.done", "inbox.expired"]) {
    src.addEventListener(t, show);
  }
  src.addEventListener("reset", refreshAll);
}

document.getElementById("composer").addEventListener("submit", (e) => { e.preventDefault(); talk("ask"); });
document.getElementById("send").addEventListener("click", () => talk("send"));
refreshAll();
follow();
