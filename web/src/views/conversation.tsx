// The conversation of a project: asks, replies, messages, delegations and
// task completions, loaded a page at a time; the composer; an answer card
// per ask.
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { registerView } from "../router";
import { app, dismissCard, loadOlder, recipient, setConvAgent, setRecipient, talk, trimConversation, useApp } from "../store";
import { clock, visible } from "../format";
import { wholeText, type Message } from "../api";

function MessageRow({ m }: { m: Message }) {
  const mine = m.from === "@person";
  return (
    <li data-id={m.id} data-kind={m.kind} class={`msg kind-${m.kind}${mine ? " mine" : ""}${m.to === "@person" ? " to-me" : ""}`}>
      <div class="meta">
        <span class="who">{m.from} → {m.to}</span> · {m.kind} · <span class={`mstate mstate-${m.state}`}>{m.state}</span>
        {m.redelivered ? " (redelivered)" : ""}{m.reason ? `: ${visible(m.reason)}` : ""}
        <time dateTime={m.created_at} title={m.created_at}>{clock(m.created_at)}</time>
      </div>
      <MessageText m={m} />
    </li>
  );
}

// MessageText is a message's text; a text the page clipped says so, with
// a "show all" link that reads it whole.
function MessageText({ m }: { m: Message }) {
  const [whole, setWhole] = useState<string | null>(null);
  const [err, setErr] = useState("");
  if (!m.clipped || whole !== null) return <div class="text">{visible(whole ?? m.text)}</div>;
  const show = (e: Event) => {
    e.preventDefault();
    wholeText(m.project, m.id).then(setWhole, (x: Error) => setErr(x.message));
  };
  return (
    <div class="text">
      {visible(m.text)}…
      <p class="note clipped">
        clipped: the whole message is {(m.size || 0).toLocaleString()} bytes · <a href="#" class="show-all" onClick={show}>show all</a>
        {err && ` (${err})`}
      </p>
    </div>
  );
}

function Messages() {
  const a = useApp();
  const ol = useRef<HTMLOListElement>(null);
  const atEnd = useRef(true);
  const lastId = useRef(0);
  const firstId = useRef(0);
  const height = useRef(0);
  const items = a.conv.items;
  const onScroll = () => {
    const e = ol.current!;
    atEnd.current = e.scrollTop + e.clientHeight >= e.scrollHeight - 4;
  };
  if (atEnd.current) trimConversation(); // a page left open for days stays small
  useLayoutEffect(() => {
    const e = ol.current!;
    const first = items[0]?.id || 0, last = items[items.length - 1]?.id || 0;
    if (first && firstId.current && first < firstId.current && last === lastId.current) {
      e.scrollTop += e.scrollHeight - height.current; // older ones above: keep the view still
    } else if (atEnd.current) {
      e.scrollTop = e.scrollHeight;
    }
    firstId.current = first; lastId.current = last; height.current = e.scrollHeight;
  });
  return (
    <>
      <button type="button" id="older" hidden={!a.conv.before} onClick={() => loadOlder()}>load older</button>
      <ol id="messages" ref={ol} onScroll={onScroll} aria-label="conversation" tabIndex={0}>
        {items.map((m) => <MessageRow key={m.id} m={m} />)}
      </ol>
      {!items.length && !a.conv.loading && <p class="note">No messages yet: ask an agent below.</p>}
    </>
  );
}

function Cards() {
  const a = useApp();
  const cards = a.cards.filter((c) => c.project === a.route.project);
  return (
    <ol id="cards" aria-live="polite">
      {cards.map((c) => (
        <li key={c.key} class={`card card-${c.state}`} data-state={c.state} data-request={c.id}>
          <div class="meta">ask to {c.to} · <span class="cstate">{c.state === "pending" ? `${c.to} is working…` : c.state}</span>
            <button type="button" class="link dismiss" aria-label="dismiss" onClick={() => dismissCard(c.key)}>×</button></div>
          <div class="q">{visible(c.text)}</div>
          {c.answer && <div class="answer">{visible(c.answer)}</div>}
          {c.error && <div class="answer err">{visible(c.error)}</div>}
        </li>
      ))}
    </ol>
  );
}

function Composer() {
  const a = useApp();
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const enterSent = useRef(false);
  const to = recipient();
  async function go(kind: "ask" | "send") {
    const t = text.trim();
    if (!t || !to || busy) return;
    setBusy(true);
    const ok = await talk(kind, to, t);
    setBusy(false);
    if (ok) setText(""); // a refused request keeps what was typed
  }
  return (
    <form id="composer" onSubmit={(e) => { e.preventDefault(); go("ask"); }}>
      <label class="sr" for="to">to</label>
      <select id="to" value={to} onChange={(e) => setRecipient((e.target as HTMLSelectElement).value)} aria-label="agent">
        {a.agents.map((ag) => <option key={ag.name} value={ag.name}>{ag.name}</option>)}
      </select>
      <textarea id="text" rows={2} value={text} placeholder="Ask or tell an agent… (Enter asks, Shift+Enter: new line)" aria-label="message"
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => { if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); enterSent.current = true; go("ask"); } }}
        onBeforeInput={(e) => {
          // The line break of the Enter that asked, when it comes as an
          // input of its own (synthetic key events do that): not typed.
          if (enterSent.current && (e as InputEvent).inputType === "insertLineBreak") e.preventDefault();
          enterSent.current = false;
        }} />
      <button type="submit" id="ask" disabled={busy}>Ask</button>
      <button type="button" id="send" disabled={busy} onClick={() => go("send")}>Send</button>
    </form>
  );
}

function Conversation() {
  const a = useApp();
  return (
    <section id="conversation" aria-label="conversation">
      <div class="toolbar">
        <label>agent <select id="conv-agent" value={a.convAgent} onChange={(e) => setConvAgent((e.target as HTMLSelectElement).value)}>
          <option value="">all</option>
          {a.agents.map((ag) => <option key={ag.name} value={ag.name}>{ag.name}</option>)}
        </select></label>
      </div>
      <Messages />
      <Cards />
      <Composer />
    </section>
  );
}

registerView({ id: "conversation", label: "Conversation", component: Conversation, inNav: true });
void app;
