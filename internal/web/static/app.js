// troupe web UI: reads the API with the session cookie, follows /api/events.
"use strict";

async function get(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (!r.ok) throw new Error((await r.json()).error || r.statusText);
  return r.json();
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  Object.assign(e, attrs || {});
  for (const k of kids) e.append(k);
  return e;
}

async function refresh() {
  const st = await get("/api/status");
  document.getElementById("status").textContent =
    `v${st.version} · ${st.projects} project(s) · ${st.agents} agent(s)`;
  const box = document.getElementById("projects");
  box.replaceChildren();
  for (const p of await get("/api/projects")) {
    box.append(el("h3", { title: p.path }, p.name + " "), el("small", {}, p.path));
    if (p.team_error) box.append(el("p", { className: "err" }, p.team_error));
    const t = el("table", {}, el("tr", {}, el("th", {}, "agent"), el("th", {}, "engine"), el("th", {}, "state")));
    for (const a of await get(`/api/projects/${p.id}/agents`)) {
      t.append(el("tr", { dataset: { agent: a.name } }, el("td", {}, a.name), el("td", {}, a.engine),
        el("td", { className: "state-" + a.state }, a.state + (a.reason ? ` (${a.reason})` : ""))));
    }
    box.append(t);
  }
}

function follow() {
  const log = document.getElementById("events");
  const src = new EventSource("/api/events");
  const show = (ev) => {
    const d = JSON.parse(ev.data);
    log.prepend(el("div", {}, `#${d.seq} ${d.time.slice(11, 19)} ${d.type} ${d.project || ""} ${d.agent || ""}`));
    refresh().catch(() => {});
  };
  for (const t of ["team.changed", "project.removed", "daemon.started", "agent.state"]) src.addEventListener(t, show);
  src.addEventListener("reset", () => refresh().catch(() => {}));
  src.onmessage = show;
}

refresh().catch((e) => { document.getElementById("status").textContent = e.message; });
follow();
