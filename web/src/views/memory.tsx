// The project's memory notes: list, search, read and edit (the notes the
// agents share through memory_read, memory_write and memory_search).
import { useEffect, useState } from "preact/hooks";
import { registerView } from "../router";
import { app, navigate, useApp } from "../store";
import { call, enc, projectPath } from "../api";
import { clock } from "../format";

interface Note { name: string; description: string; type: string; body?: string; modified?: string; snippet?: string }
interface NoteList { notes: Note[]; problems?: string[] }

function MemoryView({ arg }: { arg: string }) {
  useApp();
  const project = app.route.project;
  const [q, setQ] = useState("");
  const [list, setList] = useState<NoteList | null>(null);
  const [note, setNote] = useState<Note | null>(null);
  const [edit, setEdit] = useState<{ description: string; body: string } | null>(null);
  const [err, setErr] = useState("");
  const base = `${projectPath(project)}/memory`;

  async function load(query = q) {
    try {
      setList(await call<NoteList>("GET", query ? `${base}?q=${enc(query)}` : base));
      setErr("");
    } catch (e) { setErr((e as Error).message); }
  }
  useEffect(() => { load(""); }, [project]);
  useEffect(() => {
    setEdit(null);
    if (!arg) { setNote(null); return; }
    call<Note>("GET", `${base}/${enc(arg)}`).then(setNote, (e) => setErr((e as Error).message));
  }, [project, arg]);

  async function save(e: Event) {
    e.preventDefault();
    if (!edit || !note) return;
    try {
      const n = await call<Note>("PUT", `${base}/${enc(note.name)}`, { description: edit.description, type: note.type, body: edit.body });
      setNote(n); setEdit(null); setErr(""); load();
    } catch (e2) { setErr((e2 as Error).message); } // the edit stays open with the text
  }

  return (
    <section id="memory" aria-label="memory notes">
      <form id="memory-search" onSubmit={(e) => { e.preventDefault(); load(); }}>
        <input id="memory-q" type="search" value={q} placeholder="search the notes" aria-label="search the notes"
          onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
        <button type="submit">Search</button>
        {q && <button type="button" onClick={() => { setQ(""); load(""); }}>All notes</button>}
      </form>
      {err && <p class="err" role="alert">{err}</p>}
      <div class="memory-cols">
        <ul id="notes" class="notes">
          {list?.notes.map((n) => (
            <li key={n.name} data-note={n.name} class={n.name === arg ? "selected" : ""}>
              <a href="#" onClick={(e) => { e.preventDefault(); navigate({ view: "memory", arg: n.name }); }}>{n.name}</a>
              <div class="note">{n.description}</div>
              {n.snippet && <div class="snippet">{n.snippet.split("**").map((part, i) => i % 2 ? <mark key={i}>{part}</mark> : part)}</div>}
            </li>
          ))}
          {list && !list.notes.length && <li class="note">{q ? "No note matches." : "No notes yet."}</li>}
          {list?.problems?.map((p) => <li key={p} class="err">{p}</li>)}
        </ul>
        {note && (
          <article id="note" data-note={note.name}>
            <h3>{note.name} <span class="note">{note.type}{note.modified ? ` · ${clock(note.modified)}` : ""}</span></h3>
            {!edit ? (
              <>
                <p>{note.description}</p>
                <pre id="note-body">{note.body}</pre>
                <button type="button" id="note-edit" onClick={() => setEdit({ description: note.description, body: note.body || "" })}>Edit</button>
              </>
            ) : (
              <form id="note-form" onSubmit={save}>
                <label>description <input id="note-description" value={edit.description}
                  onInput={(e) => setEdit({ ...edit, description: (e.target as HTMLInputElement).value })} /></label>
                <textarea id="note-text" rows={16} value={edit.body} aria-label="note body"
                  onInput={(e) => setEdit({ ...edit, body: (e.target as HTMLTextAreaElement).value })} />
                <button type="submit" id="note-save">Save</button>
                <button type="button" onClick={() => setEdit(null)}>Cancel</button>
              </form>
            )}
          </article>
        )}
      </div>
    </section>
  );
}

registerView({ id: "memory", label: "Memory", component: MemoryView, inNav: true });
