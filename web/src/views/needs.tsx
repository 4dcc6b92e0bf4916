// What waits on the person, across projects: permission requests, held
// team changes (C17), and failed, blocked or waiting agents.
import { registerView } from "../router";
import { decide, decideTeam, useApp } from "../store";
import { Clip } from "../clip";
import { ago, prettyJSON } from "../format";
import { useState } from "preact/hooks";
import { permissionInput, type Permission } from "../api";
import { AgentGrantsList, CheckGrantsList } from "../grants";

// Input shows a request's input; one the listing cut is read whole on
// demand, before the person decides.
function Input({ p }: { p: Permission }) {
  const [whole, setWhole] = useState<string | null>(null);
  const [err, setErr] = useState("");
  if (!p.cut) return <Clip text={prettyJSON(p.input)} />;
  if (whole !== null) return <Clip text={prettyJSON(whole)} />;
  return (
    <div class="clip">
      <pre>{p.input}</pre>
      <p class="note">the input is cut here: it is {p.size} bytes in all.{" "}
        <button type="button" class="link read-whole" onClick={() => permissionInput(p.id).then(setWhole, (e) => setErr(String(e)))}>read it all before deciding</button>
      </p>
      {err && <p class="error">{err}</p>}
    </div>
  );
}

function NotifyToggle() {
  const [on, setOn] = useState(localStorage.getItem("troupe.notify") === "on");
  if (typeof Notification === "undefined") return null;
  async function toggle() {
    if (!on && Notification.permission !== "granted" && (await Notification.requestPermission()) !== "granted") return;
    localStorage.setItem("troupe.notify", on ? "off" : "on");
    setOn(!on);
  }
  return <button type="button" id="notify" onClick={toggle}>{on ? "Turn browser notifications off" : "Notify me in the background"}</button>;
}

function Needs() {
  const a = useApp();
  const name = (id: string) => a.projects.find((p) => p.id === id)?.name || id;
  const perms = a.permissions.filter((p) => p.state === "pending");
  const troubled = a.troubled.filter((t) => t.state !== "waiting");
  return (
    <section id="needs" aria-label="needs you">
      <NotifyToggle />
      <h2>Permission requests</h2>
      {!perms.length && <p class="note">None.</p>}
      <ul class="needs-list">
        {perms.map((p) => (
          <li key={p.id} data-permission={p.id} class="need perm">
            <div><a href={`#/p/${encodeURIComponent(p.project)}/agent/${encodeURIComponent(p.agent)}`}>{name(p.project)} / {p.agent}</a>{" "}
              asks to use <strong>{p.tool}</strong>{p.title ? `: ${p.title}` : ""} · {ago(Date.parse(p.created_at))}</div>
            <Input p={p} />
            <button type="button" class="allow" onClick={() => decide(p.id, true)}>Allow</button>{" "}
            <button type="button" class="deny" onClick={() => decide(p.id, false)}>Deny</button>
          </li>
        ))}
      </ul>
      <h2>Team changes</h2>
      {!a.teamChanges.length && <p class="note">None.</p>}
      <ul class="needs-list">
        {a.teamChanges.map((c) => (
          <li key={c.project + "/" + c.digest} data-team-change={c.project} class="need team">
            <div>{name(c.project)}: the team file gives more than you approved (until you decide, these agents keep what you approved)</div>
            <AgentGrantsList agents={c.agents} />
            <CheckGrantsList checks={c.checks || []} />
            <button type="button" class="allow" onClick={() => decideTeam(c.project, c.digest, true)}>Approve</button>{" "}
            <button type="button" class="deny" onClick={() => decideTeam(c.project, c.digest, false)}>Reject</button>
          </li>
        ))}
      </ul>
      <h2>Agents in trouble</h2>
      {!troubled.length && <p class="note">None.</p>}
      <ul class="needs-list">
        {troubled.map((t) => (
          <li key={t.project + "/" + t.name} class="need agent" data-agent={t.name}>
            <a href={`#/p/${encodeURIComponent(t.project)}/agent/${encodeURIComponent(t.name)}`}>{name(t.project)} / {t.name}</a>{" "}
            <span class={`state state-${t.state}`}>{t.state}</span>{t.reason ? `: ${t.reason}` : ""}
          </li>
        ))}
      </ul>
    </section>
  );
}

registerView({ id: "needs", label: "Needs you", component: Needs, inNav: true });
