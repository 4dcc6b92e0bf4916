// The runners: the other machines that run some of the agents (GET
// /api/runners), each with its labels, since when it is connected or when
// it was last seen, its agents and its load, read again every few seconds
// while shown. Adding and revoking a runner is the CLI's (troupe runner
// add / revoke): its credentials are a file for the other machine.
import { useEffect, useState } from "preact/hooks";
import { registerView } from "../router";
import { useApp } from "../store";
import { call, type Runner } from "../api";
import { ago, when } from "../format";

const every = 5000; // ms between reads while the view is shown

function connection(r: Runner): string {
  const at = (iso?: string) => (iso ? `${when(iso)} (${ago(Date.parse(iso))})` : "");
  if (r.connected) return `since ${at(r.connected_since)}`;
  return r.last_seen ? `no, last seen ${at(r.last_seen)}` : "no, never connected";
}

function RunnersView() {
  const a = useApp();
  const [list, setList] = useState<Runner[] | null>(null);
  const [err, setErr] = useState("");
  useEffect(() => {
    let live = true;
    const load = () => call<Runner[]>("GET", "/api/runners").then(
      (l) => { if (live) { setList(l); setErr(""); } },
      (e) => { if (live) setErr((e as Error).message); });
    load();
    const t = setInterval(load, every);
    return () => { live = false; clearInterval(t); };
  }, []);
  const project = (id: string) => a.projects.find((p) => p.id === id)?.name || id;
  return (
    <section id="runners-view" aria-label="runners">
      {err && <p class="err" role="alert">{err}</p>}
      {list && !list.length && <p class="note">No runners: add one with <code>troupe runner add NAME</code>.</p>}
      {list && list.length > 0 && (
        <table id="runners">
          <thead><tr><th>runner</th><th>labels</th><th>connected</th><th>agents</th><th>load</th></tr></thead>
          <tbody>
            {list.map((r) => (
              <tr key={r.name} data-runner={r.name} data-connected={String(r.connected)}>
                <td>{r.name}</td>
                <td>{r.labels.join(", ") || "-"}</td>
                <td class={r.connected ? "" : "err"}>{connection(r)}</td>
                <td>{r.agents.length ? r.agents.map((ag, i) => (
                  <span key={`${ag.project}/${ag.agent}`}>{i ? ", " : ""}
                    <a href={`#/p/${encodeURIComponent(ag.project)}/agent/${encodeURIComponent(ag.agent)}`}>{project(ag.project)}/{ag.agent}</a>{" "}
                    <span class={`state state-${ag.state}`}>{ag.state}</span></span>
                )) : "-"}</td>
                <td>{r.load.agents}{r.load.max_agents ? `/${r.load.max_agents}` : ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

registerView({ id: "runners", label: "Runners", component: RunnersView, inNav: true });
