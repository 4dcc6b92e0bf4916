// The team: the team file of the project, edited by the person (what it
// widens waits for their approval in Needs you, C17), and a new project
// added by its folder, its team's grants shown before they are approved.
import { useEffect, useState } from "preact/hooks";
import { registerView } from "../router";
import { app, navigate, reloadAll, useApp } from "../store";
import { ApiError, call, projectPath, type Project, type ProjectPreview, type TeamFile } from "../api";
import { AgentGrantsList } from "../grants";

function TeamFileEditor({ project }: { project: string }) {
  const [file, setFile] = useState<TeamFile | null>(null);
  const [text, setText] = useState("");
  const [msg, setMsg] = useState("");
  const [err, setErr] = useState("");
  const [stale, setStale] = useState(false);

  async function load() {
    try {
      const f = await call<TeamFile>("GET", `${projectPath(project)}/team/file`);
      setFile(f); setText(f.text); setErr(""); setStale(false);
    } catch (e) { setErr((e as Error).message); }
  }
  useEffect(() => { setMsg(""); load(); }, [project]);

  async function save(e: Event) {
    e.preventDefault();
    if (!file) return;
    try {
      const p = await call<Project>("PUT", `${projectPath(project)}/team/file`, { text, digest: file.digest });
      setMsg(p.team_held ? "Saved. It gives agents more than you approved: decide in Needs you." :
        p.team_error ? `Saved, but the team does not load: ${p.team_error}` : "Saved and in force.");
      setErr("");
      await load();
      reloadAll();
    } catch (e2) {
      // The text stays in the editor, whatever failed.
      setErr((e2 as Error).message);
      setStale(e2 instanceof ApiError && e2.status === 409);
    }
  }

  if (!file) return err ? <p class="err" role="alert">{err}</p> : null;
  return (
    <form id="team-file" onSubmit={save}>
      <h2>Team file <code class="note">{file.path}</code></h2>
      <textarea id="team-text" rows={24} spellcheck={false} value={text} aria-label="team file"
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
      <div>
        <button type="submit" id="team-save" disabled={text === file.text}>Save</button>{" "}
        <button type="button" onClick={() => setText(file.text)} disabled={text === file.text}>Undo my changes</button>
        {stale && <> <button type="button" id="team-reload" onClick={load}>Load the file as it is now (your text is dropped)</button></>}
      </div>
      {msg && <p id="team-msg" class="note" role="status">{msg}{msg.includes("Needs you") && <> <a href={`#/p/${encodeURIComponent(project)}/needs`}>Needs you</a></>}</p>}
      {err && <p id="team-err" class="err" role="alert">{err}</p>}
    </form>
  );
}

function AddProject() {
  const [path, setPath] = useState("");
  const [pv, setPv] = useState<ProjectPreview | null>(null);
  const [err, setErr] = useState("");

  async function preview(e: Event) {
    e.preventDefault();
    setPv(null);
    try { setPv(await call<ProjectPreview>("POST", "/api/projects/preview", { path })); setErr(""); }
    catch (e2) { setErr((e2 as Error).message); }
  }
  async function add() {
    if (!pv) return;
    try {
      const p = await call<Project>("POST", "/api/projects", { path: pv.path, digest: pv.digest });
      setPv(null); setPath(""); setErr("");
      await reloadAll();
      navigate({ project: p.id, view: p.team_held ? "needs" : "team", arg: "" });
    } catch (e2) { setErr((e2 as Error).message); }
  }

  return (
    <section id="add-project" aria-label="add a project">
      <h2>Add a project</h2>
      <form id="add-form" onSubmit={preview}>
        <input id="add-path" value={path} placeholder="/home/you/code/project" aria-label="the project's folder"
          onInput={(e) => { setPath((e.target as HTMLInputElement).value); setPv(null); }} />
        <button type="submit" id="add-preview" disabled={!path.trim()}>Show its team</button>
      </form>
      {err && <p id="add-err" class="err" role="alert">{err}</p>}
      {pv && (
        <div id="add-grants">
          <p><code>{pv.path}</code>: {pv.team_error ? "its team file does not load:" : pv.grants.length ? "adding it approves what its agents may do:" : "no team file yet (.troupe/team.toml): troupe init writes one."}</p>
          {pv.team_error && <p class="err">{pv.team_error}</p>}
          <AgentGrantsList agents={pv.grants} />
          {(pv.checks || []).map((c) => <div key={c.name} class="team-agent team-check">check <strong>{c.name}</strong> runs <code>{c.command}</code></div>)}
          <button type="button" id="add-confirm" class="allow" onClick={add}>{pv.grants.length ? "Add it and approve this team" : "Add it"}</button>{" "}
          <button type="button" onClick={() => setPv(null)}>Cancel</button>
        </div>
      )}
    </section>
  );
}

function TeamView() {
  const a = useApp();
  const project = app.route.project;
  return (
    <section id="team" aria-label="team">
      {project && a.projects.some((p) => p.id === project) && <TeamFileEditor project={project} />}
      <AddProject />
    </section>
  );
}

registerView({ id: "team", label: "Team", component: TeamView, inNav: true });
