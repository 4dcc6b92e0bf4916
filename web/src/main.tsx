// troupe's web UI: the team, its conversation, each agent's live
// transcript, what needs the person, tasks. State lives in store.ts; the
// views register themselves in router.ts.
import { render } from "preact";
import { useEffect } from "preact/hooks";
import "./style.css";
import { app, boot, clearError, navigate, needsCount, useApp } from "./store";
import { findView, views } from "./router";
import { Unsandboxed } from "./sandbox";
import { RunsOn } from "./runner";
import "./views/conversation";
import "./views/agent";
import "./views/tasks";
import "./views/needs";
import "./views/memory";
import "./views/changes";
import "./views/attempts";
import "./views/terminal";
import "./views/sessions";
import "./views/runners";
import "./views/team";

// notify shows a browser notification when more waits on the person than
// before, if the person turned them on (Needs you) and the page is hidden.
let lastCount = 0;
function notify(n: number) {
  const more = n > lastCount;
  lastCount = n;
  if (!more || !document.hidden || localStorage.getItem("troupe.notify") !== "on") return;
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  new Notification("troupe", { body: `${n} thing(s) need you` });
}

function Header() {
  const a = useApp();
  const n = needsCount();
  useEffect(() => {
    document.title = n ? `(${n}) troupe` : "troupe";
    notify(n);
  }, [n]);
  const conn = a.conn === "live" ? "" : a.conn === "connecting" ? "connecting…" : "reconnecting…";
  return (
    <header>
      <h1>troupe</h1>
      <span id="status">{a.status ? `${a.status.version} · ${a.projects.length} project(s)` : ""}</span>
      <span id="conn" class={`conn conn-${a.conn}`} role="status" aria-live="polite" hidden={!conn}>{conn}</span>
      <a id="needs-link" class={n ? "needs has" : "needs"} href={`#/p/${encodeURIComponent(a.route.project)}/needs`}>
        needs you{n ? ` (${n})` : ""}
      </a>
    </header>
  );
}

function Sidebar() {
  const a = useApp();
  const cur = a.projects.find((p) => p.id === a.route.project);
  return (
    <nav id="left" aria-label="projects and team">
      <h2>Projects</h2>
      <ul id="projects">
        {a.projects.map((p) => (
          <li key={p.id}>
            <a href={`#/p/${encodeURIComponent(p.id)}/conversation`} class={p.id === a.route.project ? "selected" : ""}
              data-project={p.id} title={p.path}>{p.name} ({p.agents})</a>
          </li>
        ))}
      </ul>
      <a id="add-project-link" href={`#/p/${encodeURIComponent(a.route.project)}/team`}>+ add a project</a>
      <h2>Team</h2>
      {cur?.team_error && <p id="team-error" class="err">{cur.team_error}</p>}
      <table id="agents">
        <thead><tr><th>agent</th><th>engine</th><th>state</th></tr></thead>
        <tbody>
          {a.agents.map((ag) => (
            <tr key={ag.name} data-agent={ag.name} data-sandboxed={String(ag.sandboxed)} class={a.route.view === "agent" && a.route.arg === ag.name ? "selected" : ""}>
              <td><a href={`#/p/${encodeURIComponent(a.route.project)}/agent/${encodeURIComponent(ag.name)}`}>{ag.name}</a>
                {!ag.sandboxed && <> <Unsandboxed /></>}
                {(ag.runner || ag.runner_labels) && <> <RunsOn ag={ag} /></>}</td>
              <td>{ag.engine}</td>
              <td class={`state state-${ag.state}`}>{ag.state}{ag.reason ? ` (${ag.reason})` : ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </nav>
  );
}

function Tabs() {
  const a = useApp();
  return (
    <div class="tabs" role="tablist">
      {views.filter((v) => v.inNav).map((v) => (
        <a key={v.id} role="tab" aria-selected={a.route.view === v.id} class={a.route.view === v.id ? "tab on" : "tab"}
          id={`tab-${v.id}`} href={`#/p/${encodeURIComponent(a.route.project)}/${v.id}`}>{v.label}</a>
      ))}
      {a.route.view === "agent" && <span class="tab on" role="tab" aria-selected="true">agent: {a.route.arg}</span>}
    </div>
  );
}

function Main() {
  const a = useApp();
  const V = findView(a.route.view).component;
  return (
    <main id="main">
      <Tabs />
      {a.error && (
        <p id="error" class="err banner" role="alert">
          {a.error} <button type="button" class="link" onClick={clearError}>dismiss</button>
        </p>
      )}
      <V arg={a.route.arg} />
    </main>
  );
}

function App() {
  return (
    <>
      <Header />
      <div class="layout">
        <Sidebar />
        <Main />
      </div>
    </>
  );
}

render(<App />, document.getElementById("app")!);
boot();
// For tests and debugging: the feed's last event number.
(window as any).troupe = { app, navigate };
