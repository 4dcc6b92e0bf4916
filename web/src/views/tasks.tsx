// Background tasks of the project: running and ended, with the tail of
// the selected one's output, its exit code and duration, and a kill button.
import { useEffect, useState } from "preact/hooks";
import { registerView } from "../router";
import { killTask, loadTaskOutput, navigate, runTask, useApp } from "../store";
import { clock, duration, visible } from "../format";
import type { Task } from "../api";

function took(t: Task, now: number) {
  const end = t.ended_at ? Date.parse(t.ended_at) : now;
  return duration(Math.max(0, end - Date.parse(t.started_at)));
}

function Tasks({ arg }: { arg: string }) {
  const a = useApp();
  const [cmd, setCmd] = useState("");
  useEffect(() => { if (arg) loadTaskOutput(arg).catch(() => {}); }, [arg]);
  const now = Date.now();
  const sel = a.tasks.find((t) => t.id === arg);
  return (
    <section id="tasks-view" aria-label="tasks">
      <form id="task-form" onSubmit={async (e) => { e.preventDefault(); if (cmd.trim() && await runTask(cmd.trim())) setCmd(""); }}>
        <input id="task-command" value={cmd} placeholder="a shell command to run in the project folder" aria-label="command"
          onInput={(e) => setCmd((e.target as HTMLInputElement).value)} />
        <button type="submit" id="task-run">Run</button>
      </form>
      <table id="tasks">
        <thead><tr><th>task</th><th>owner</th><th>state</th><th>exit</th><th>took</th><th>command</th><th></th></tr></thead>
        <tbody>
          {a.tasks.map((t) => (
            <tr key={t.id} data-task={t.id} data-state={t.state} class={t.id === arg ? "selected" : ""}>
              <td><a href="#" onClick={(e) => { e.preventDefault(); navigate({ view: "tasks", arg: t.id }); }}>{t.id}</a></td>
              <td>{t.owner}{t.runner && <span class="runner" title="runs on this runner"> on {t.runner}</span>}</td>
              <td class={`tstate tstate-${t.state}`}>{t.state}{t.signal ? ` (${t.signal})` : ""}</td>
              <td>{t.state === "running" ? "" : t.exit_code}</td>
              <td>{took(t, now)}</td>
              <td class="cmd">{t.command}</td>
              <td>{t.state === "running" && <button type="button" class="kill" onClick={() => killTask(t.id)}>Kill</button>}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!a.tasks.length && <p class="note">No tasks.</p>}
      {sel && (
        <div id="task-detail">
          <h3>{sel.id}: <code>{sel.command}</code></h3>
          <p class="note">started {clock(sel.started_at)}{sel.ended_at ? ` · ended ${clock(sel.ended_at)}` : " · running"}{sel.reason ? ` · ${sel.reason}` : ""}
            {sel.output?.cut_bytes ? ` · ${sel.output.cut_bytes} bytes cut from the middle` : ""}</p>
          <pre id="task-output">{visible(a.taskOutput.get(sel.id) ?? "…")}</pre>
        </div>
      )}
    </section>
  );
}

registerView({ id: "tasks", label: "Tasks", component: Tasks, inNav: true });
