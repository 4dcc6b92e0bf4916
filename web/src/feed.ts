// The event feed: /api/events as Server-Sent Events, scoped to the selected
// project on the server (?project=), resumed with ?since= after a drop or a
// daemon restart, with a visible connection state. A "reset" event (the
// daemon no longer holds what was missed, or it restarted) makes the UI
// re-read its state.

export interface FeedEvent { seq: number; time: string; type: string; project?: string; agent?: string; data?: any }

export type Conn = "connecting" | "live" | "reconnecting";

// Every type of the catalogue (internal/events/types.go).
export const eventTypes = [
  "daemon.started", "team.changed", "project.removed", "agent.state", "agent.output", "agent.thinking",
  "agent.tool_call", "agent.tool_result", "agent.usage", "agent.session", "agent.notice", "agent.permission",
  "turn.started", "turn.ended", "message.queued", "request.done", "inbox.expired",
  "task.started", "task.ended", "check.ended", "attempt.changed", "worktree.kept", "team.held", "team.decided",
];

export class Feed {
  private src: EventSource | null = null;
  private timer = 0;
  private backoff = 500;
  last = 0; // the last event number seen
  conn: Conn = "connecting";

  constructor(
    private project: () => string,
    private onEvent: (e: FeedEvent) => void,
    private onReset: () => void,
    private onConn: (c: Conn) => void,
  ) {}

  start() {
    this.stop();
    const q = new URLSearchParams();
    if (this.last) q.set("since", String(this.last));
    if (this.project()) q.set("project", this.project());
    const src = new EventSource(`/api/events?${q}`, { withCredentials: true });
    this.src = src;
    src.onopen = () => { this.backoff = 500; this.setConn("live"); };
    src.onerror = () => {
      // EventSource retries by itself, but not after an HTTP error, and
      // it would resume without our ?project=: take over.
      if (this.src !== src) return;
      src.close();
      this.src = null;
      this.setConn("reconnecting");
      this.timer = window.setTimeout(() => this.start(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    };
    const handle = (ev: MessageEvent) => {
      if (this.src !== src) return;
      const d = JSON.parse(ev.data) as FeedEvent;
      if (d.seq) this.last = d.seq;
      this.onEvent(d);
    };
    for (const t of eventTypes) src.addEventListener(t, handle as EventListener);
    src.addEventListener("reset", ((ev: MessageEvent) => {
      if (this.src !== src) return;
      const d = JSON.parse(ev.data) as { last: number };
      this.last = d.last;
      this.onReset();
    }) as EventListener);
  }

  /** restart follows another project from the last event seen. */
  restart() { this.start(); }

  stop() {
    clearTimeout(this.timer);
    if (this.src) { this.src.close(); this.src = null; }
  }

  private setConn(c: Conn) {
    if (c === this.conn) return;
    this.conn = c;
    this.onConn(c);
  }
}
