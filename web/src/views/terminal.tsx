// Terminal: xterm.js on the WebSocket of a terminal-mode agent (GET
// …/agents/{agent}/terminal, docs/API.md "Terminal"): a text message
// {"type":"attached","cols","rows"}, then the screen as it is (a
// snapshot), then the program's output; keys go back as binary messages,
// the view's size as {"type":"resize"}. A dropped connection reconnects
// and the new snapshot redraws the screen, so nothing is lost.
import { useEffect, useRef, useState } from "preact/hooks";
import type { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { registerView } from "../router";
import { app, navigate, useApp } from "../store";
import { Agent, agentPath } from "../api";

// xterm's DOM renderer keeps its theme, cell sizes and scrollbar colours
// in <style> elements it creates and fills; the page's CSP (default-src
// 'self', no inline style) refuses each of them, empty or not, with a
// violation in the console. So xterm is given no <style> to make:
// inertCreate is createElement but for "style", which makes a <template>
// instead (inert: never rendered nor applied as style, so no CSP check).
// xterm creates most of its elements through options.documentOverride
// (inertStyles: the page's document with inertCreate), the rest through
// the page's document during open (openInert). mirrorStyles copies those
// templates' text into a constructed style sheet (CSSOM, which the CSP
// allows, as it allows element.style) each time xterm changes them.
const createElement = Document.prototype.createElement;

function inertCreate(doc: Document) {
  return (tag: string, opts?: ElementCreationOptions): HTMLElement => {
    if (tag.toLowerCase() !== "style") return createElement.call(doc, tag, opts);
    const t = createElement.call(doc, "template");
    t.dataset.xtermStyle = "";
    return t;
  };
}

function inertStyles(doc: Document): Document {
  const create = inertCreate(doc);
  return new Proxy(doc, {
    get(target, prop) {
      if (prop === "createElement") return create;
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

function openInert(term: Terminal, el: HTMLElement) {
  const d = document as { createElement: unknown };
  d.createElement = inertCreate(document);
  try { term.open(el); } finally { delete d.createElement; }
}

function mirrorStyles(root: HTMLElement): () => void {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  const copy = () => {
    const text = [...root.querySelectorAll("template[data-xterm-style]")].map((s) => s.textContent || "").join("\n");
    try { sheet.replaceSync(text); } catch { /* a rule the browser does not take */ }
  };
  const mo = new MutationObserver(copy);
  mo.observe(root, { subtree: true, childList: true, characterData: true });
  copy();
  return () => { mo.disconnect(); document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet); };
}

type ConnState = { state: "connecting" | "attached" | "closed" | "ended"; reason?: string; size?: string };

function TermScreen({ agent }: { agent: string }) {
  const box = useRef<HTMLDivElement>(null);
  const [st, setSt] = useState<ConnState>({ state: "connecting" });
  const reconnect = useRef<() => void>(() => {});
  const project = app.route.project;

  useEffect(() => {
    let cleanup: (() => void) | undefined;
    let gone = false;
    // xterm.js is a chunk of its own, fetched the first time a terminal opens.
    import("@xterm/xterm").then(({ Terminal }) => {
      if (!gone) cleanup = attach(new Terminal({ fontFamily: "ui-monospace, monospace", fontSize: 13, scrollback: 2000, documentOverride: inertStyles(document) }));
    }, (e) => setSt({ state: "closed", reason: `could not load the terminal: ${(e as Error).message}` }));
    return () => { gone = true; cleanup?.(); };
  }, [project, agent]);

  function attach(term: Terminal): () => void {
    const el = box.current!;
    openInert(term, el);
    const unmirror = mirrorStyles(el);
    let ws: WebSocket | null = null;
    let stopped = false;
    let retry: number | undefined;
    let delay = 500;
    const enc = new TextEncoder();

    const send = (data: string | Uint8Array) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(data); };
    // fit sizes the terminal to its box from xterm's cell size (the
    // screen element's size over the grid), and tells the program.
    const fit = () => {
      const scr = el.querySelector<HTMLElement>(".xterm-screen");
      if (!scr || !scr.clientWidth || !scr.clientHeight) return;
      const cw = scr.clientWidth / term.cols, ch = scr.clientHeight / term.rows;
      const cols = Math.max(2, Math.min(1000, Math.floor((el.clientWidth - 16) / cw)));
      const rows = Math.max(2, Math.min(1000, Math.floor(el.clientHeight / ch)));
      if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows);
      send(JSON.stringify({ type: "resize", cols, rows }));
      setSt((s) => ({ ...s, size: `${cols}×${rows}` }));
    };
    const ro = new ResizeObserver(() => fit());
    ro.observe(el);
    const keys = term.onData((d) => send(enc.encode(d)));
    const bin = term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 255)));

    const connect = () => {
      if (stopped) return;
      setSt({ state: "connecting" });
      const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${agentPath(project, agent)}/terminal`;
      const s = new WebSocket(url);
      ws = s;
      s.binaryType = "arraybuffer";
      let snapshot = false;
      s.onmessage = (ev) => {
        if (typeof ev.data === "string") {
          try {
            const m = JSON.parse(ev.data);
            if (m.type === "attached") {
              // The next binary message redraws the whole screen at the
              // program's size: start from a clean one of that size.
              term.reset();
              if (m.cols > 0 && m.rows > 0) term.resize(m.cols, m.rows);
              snapshot = true;
              delay = 500;
              setSt({ state: "attached", size: `${m.cols}×${m.rows}` });
            }
          } catch { /* not ours */ }
          return;
        }
        // The snapshot is drawn at the program's size: fit to the box only
        // once xterm has parsed it (write is asynchronous).
        if (snapshot) { snapshot = false; term.write(new Uint8Array(ev.data as ArrayBuffer), fit); return; }
        term.write(new Uint8Array(ev.data as ArrayBuffer));
      };
      s.onclose = (ev) => {
        if (ws !== s || stopped) return;
        ws = null;
        const reason = ev.reason || (ev.code === 1006 ? "the connection dropped (or the daemon refused it)" : `closed (${ev.code})`);
        // The program's end is not retried by itself: attaching again
        // starts the agent's session again, which the person decides
        // (Reconnect). A drop, a daemon restart or falling behind is.
        if (/program ended/.test(reason)) { setSt({ state: "ended", reason }); return; }
        setSt({ state: "closed", reason });
        retry = window.setTimeout(connect, delay);
        delay = Math.min(delay * 2, 5000);
      };
    };
    connect();
    reconnect.current = () => { clearTimeout(retry); delay = 500; connect(); };
    ((window as any).troupe ||= {}).terminal = { term, drop: () => ws?.close() };
    return () => {
      stopped = true;
      clearTimeout(retry);
      ro.disconnect(); keys.dispose(); bin.dispose();
      ws?.close();
      term.dispose();
      unmirror();
      if ((window as any).troupe) delete (window as any).troupe.terminal;
    };
  }

  return (
    <>
      <p class="note" id="term-state" data-state={st.state} role="status">
        {st.state === "attached" ? `attached${st.size ? ` · ${st.size}` : ""} · keys go to the program; the agent's queued turns wait until 3 s after your last key`
          : st.state === "connecting" ? "connecting…"
            : st.state === "ended" ? `${st.reason}. `
              : `disconnected: ${st.reason}; reconnecting…`}
        {st.state === "ended" && <button type="button" id="term-reconnect" onClick={() => reconnect.current()}>Reconnect (starts it again)</button>}
      </p>
      <div id="term" ref={box} class="term-box" />
    </>
  );
}

// isTerminal: the agent runs on a terminal (mode = "terminal", or the
// generic engine "terminal", which is always so).
const isTerminal = (x: Agent) => x.mode === "terminal" || x.engine === "terminal";

function TerminalView({ arg }: { arg: string }) {
  const a = useApp();
  const terms = a.agents.filter(isTerminal);
  const ag = a.agents.find((x) => x.name === arg);
  return (
    <section id="terminal" aria-label="terminal">
      <ul class="term-agents">
        {terms.map((x) => (
          <li key={x.name}><a href="#" data-agent={x.name} class={x.name === arg ? "selected" : ""}
            onClick={(e) => { e.preventDefault(); navigate({ view: "terminal", arg: x.name }); }}>{x.name}</a> <span class="note">{x.engine} · {x.state}</span></li>
        ))}
      </ul>
      {!terms.length && <p class="note" id="no-terminal">No agent of this project runs in terminal mode (<code>mode = "terminal"</code>, or <code>engine = "terminal"</code>): their work shows in the agent view.</p>}
      {arg && !ag && <p class="note" id="term-none">No agent {arg} in this project.</p>}
      {ag && !isTerminal(ag) && (
        <p class="note" id="term-not-terminal">{arg} runs in structured mode, so it has no terminal to attach to: its transcript is in the <a href={`#/p/${encodeURIComponent(a.route.project)}/agent/${encodeURIComponent(arg)}`}>agent view</a>.</p>
      )}
      {ag && isTerminal(ag) && <TermScreen key={`${a.route.project}/${arg}`} agent={arg} />}
    </section>
  );
}

registerView({ id: "terminal", label: "Terminal", component: TerminalView, inNav: true });
