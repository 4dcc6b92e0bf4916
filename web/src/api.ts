// The daemon's API as the UI uses it: JSON over fetch with the session
// cookie (same origin), and the wire types of docs/API.md. Every interface
// here is held to the Go type it reads by internal/api/wire_test.go: a
// field added, renamed or made optional in Go fails there.

export type AgentState = "stopped" | "starting" | "idle" | "busy" | "waiting" | "blocked" | "failed" | "limited" | "unreachable";

export interface Project { id: string; path: string; name: string; agents: number; team: string; team_error?: string; team_held?: boolean; added_at: string; grants?: AgentGrants[] }
/** turn_timeout, idle_timeout: Go durations ("10m0s"). sandboxed: false when the team turned its sandbox off.
 * runner: where it runs (empty: this machine, or with runner_labels, no runner placed yet). */
export interface Agent { project: string; name: string; engine: string; model?: string; mode: string; state: AgentState; reason?: string; session_id: string; turn_timeout: string; idle_timeout: string; sandboxed: boolean; doing?: string; doing_since?: string; caps?: { memory: string; processes: string; in_force: boolean; why?: string }; checkpoints?: string; runner?: string; runner_labels?: string[] }
export interface Message {
  id: number; project: string; to: string; from: string; kind: string; text: string; request?: string;
  state: string; reason?: string; turn?: string; redelivered?: boolean; created_at: string; done_at?: string;
  /** clipped: text is the first 64 KB of size bytes (a page clips long texts); wholeText reads it all. */
  clipped?: boolean; size?: number;
}
export interface MessageText { message: Message; offset: number; next?: number }
export interface MessagePage { messages: Message[]; before?: number; after?: number }
export interface Request { id: string; project: string; from: string; to?: string; kind: string; question: string; state: string; answer?: string; error?: string; detached?: boolean; created_at: string; done_at?: string; limited_until?: string; unreachable?: string; verify?: string; tries?: number; tried?: number; checking?: boolean; verdict?: Verdict }
/** troupe's check of a verified delegation's work (troupe.Verdict). */
export interface Verdict { check: string; state: string; exit_code: number; duration_ms: number; result?: number; turn?: string; try: number; reason?: string; output?: string; output_cut?: boolean }
export interface Task {
  id: string; project: string; owner: string; command: string; cwd: string; state: string; exit_code: number;
  signal?: string; reason?: string; started_at: string; ended_at?: string; timeout: string;
  /** runner: the runner the task runs on (its owner's); absent: the daemon's machine. */
  runner?: string;
  /** output: total_bytes written, cut_bytes dropped between the kept head and tail. */
  output?: { total_bytes: number; head_bytes: number; tail_bytes: number; cut_bytes: number };
  stopped?: { count: number; signal: string; procs?: { pid: number; command: string; escaped?: string }[]; remaining?: number };
}
export interface Permission { id: string; project: string; agent: string; turn: string; tool: string; title?: string; input: string; cut?: boolean; size: number; state: string; reason?: string; created_at: string }
export interface PermissionInputPage { input: string; offset: number; size: number }
export interface Grant { field: string; old?: string; new: string }
export interface AgentGrants { agent: string; engine?: string; new?: boolean; grants: Grant[]; options?: Record<string, unknown> }
/** PendingTeam is a team change that widens what agents may do and waits for the person (C17). */
/** CheckGrants is a held check ([checks]): a new one, or its command, dir or a longer timeout. */
export interface CheckGrants { check: string; new?: boolean; grants: Grant[] }
/** ProjectPreview is what adding a folder would register (POST /api/projects/preview); adding it with digest approves exactly this team. */
export interface ProjectPreview { path: string; grants: AgentGrants[]; checks?: { name: string; command: string; timeout: number; dir?: string }[]; digest?: string; team_error?: string }
/** TeamFile is the team file's text and the digest of the file it was read from (GET/PUT .../team/file). */
export interface TeamFile { text: string; digest: string; path?: string }
export interface PendingTeam { project: string; digest: string; agents: AgentGrants[]; checks?: CheckGrants[]; rejected?: boolean }
/** Runner is a machine that runs some of the agents (GET /api/runners): connected_since is set
 * while it is connected, last_seen is when the daemon last heard from it. */
export interface Runner { name: string; labels: string[]; connected: boolean; connected_since?: string; last_seen?: string; agents: RunnerAgent[]; load: RunnerLoad }
export interface RunnerAgent { project: string; agent: string; state: AgentState }
/** max_agents: the most the runner takes (0: it has not said). */
export interface RunnerLoad { agents: number; max_agents: number }
export interface Status { running: boolean; version: string; pid: number; addr: string; state_dir: string; started_at: string; projects: number; agents: number; last_event: number }

export interface JournalTool { id: string; name?: string; input?: string; output?: string; is_error?: boolean }
export interface Usage { input_tokens: number; output_tokens: number; cache_read_tokens?: number; cache_write_tokens?: number; cost_usd?: number }
export interface JournalEvent {
  seq: number; at: string; kind: "output" | "thinking" | "tool_call" | "tool_result" | "usage" | "session" | "permission" | "notice" | "checkpoint";
  /** cut: text is the head of size bytes. */
  text?: string; tool?: JournalTool; usage?: Usage; session_id?: string; cut?: boolean; size?: number;
  permission?: { id: string; tool: string; title?: string; input?: string; allow: boolean; reason?: string };
}
export interface Turn {
  seq: number; project: string; agent: string; turn: string; started_at: string; messages: { id: number; from: string; kind: string; text: string; cut?: boolean }[];
  /** dropped: events past the turn's cap, not kept; text_cut: text is a head. */
  events: JournalEvent[]; dropped?: number; ended_at?: string; duration_ms?: number; text?: string; text_cut?: boolean; error?: string; usage?: Usage;
}
export interface AgentLog { agent: string; turns: Turn[]; before?: number }
/** Checkpoint is one snapshot of an agent's workspace (C18). reason: "turn" (the end of turn),
 * or what was about to happen ("rewind to N", "reset", "worktree reset", …); files, added,
 * deleted: what changed since the snapshot it is compared with; skipped: files too large to keep,
 * the first of them named. */
/** One run of a project's check on an agent's workspace (GET .../checks). */
export interface CheckResult {
  id: number; project: string; agent: string; check: string; command: string; dir?: string;
  state: "passed" | "failed" | "timed_out" | "error"; exit_code: number; reason?: string; turn?: string;
  started_at: string; duration_ms: number; output: string; output_bytes: number; output_cut?: string;
}

/** ChangeStat is the size of a change: files, lines added and deleted (cut: more files than git's output held). */
export interface ChangeStat { files: number; added: number; deleted: number; cut?: boolean }
/** AttemptMember is one agent of an attempt: state working → checking → done; check is its check
 * result's id, output that result's last 4 KB; rank and reason once the attempt is done. */
export interface AttemptMember {
  agent: string; engine: string; model?: string; state: "working" | "checking" | "done"; request?: string; request_state?: string;
  error?: string; check?: number; verdict?: "passed" | "failed" | "timed_out" | "error"; exit_code: number; output?: string; change: ChangeStat;
  delegated_at: string; ended_at?: string; duration_ms?: number; cost_usd?: number; rank?: number; reason?: string;
}
/** Attempt is one task given to several worktree agents from the same base (GET …/attempts):
 * members in rank order once done; winner: the first, when it passed and changed something. */
export interface Attempt {
  id: number; project: string; task: string; check: string; base: string; state: "running" | "done";
  created_at: string; ended_at?: string; winner?: string; discarded?: boolean; members: AttemptMember[];
}
/** AttemptRequest is POST …/attempts's body (check: "" for the project's only check). */
export interface AttemptRequest { task: string; agents: string[]; check?: string }
/** DiscardAttemptResponse says whose worktrees a discard reset. */
export interface DiscardAttemptResponse { attempt: Attempt; reset: string[] }

export interface Checkpoint {
  seq: number; commit: string; at: string; reason: string; turn?: string; files: number; added: number; deleted: number;
  skipped?: number; skipped_names?: string[];
}
/** CheckpointsResponse is GET …/agents/{agent}/checkpoints: oldest first;
 * unavailable says why a workspace has none (not a git repository). */
export interface CheckpointsResponse { checkpoints: Checkpoint[]; unavailable?: string }
/** RewindResponse is POST …/rewind {seq}: before is the checkpoint of the files
 * as they were, made first (rewinding to it undoes the rewind). */
export interface RewindResponse { before: Checkpoint; seq: number }

/** ApiError is a non-2xx answer: its message is the daemon's sentence. */
export class ApiError extends Error {
  constructor(message: string, readonly status: number) { super(message); }
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  let r: Response;
  try {
    r = await fetch(path, {
      method, credentials: "same-origin",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError("the daemon is not reachable", 0);
  }
  const text = r.status === 204 ? "" : await r.text();
  let data: any = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* a proxy's page, say */ }
  if (!r.ok) throw new ApiError((data && data.error) || r.statusText || `HTTP ${r.status}`, r.status);
  return data as T;
}

export const enc = encodeURIComponent;
export const projectPath = (p: string) => `/api/projects/${enc(p)}`;
export const agentPath = (p: string, a: string) => `${projectPath(p)}/agents/${enc(a)}`;

// permissionInput reads a pending request's whole input, page by page:
// what the person approves is what runs.
export async function permissionInput(id: string): Promise<string> {
  let out = "";
  let bytes = 0;
  const enc = new TextEncoder();
  for (;;) {
    const pg = await call<PermissionInputPage>("GET", `/api/permissions/${encodeURIComponent(id)}/input?offset=${bytes}`);
    out += pg.input;
    bytes += enc.encode(pg.input).length;
    if (!pg.input || bytes >= pg.size) return out;
  }
}

/** wholeText reads message id's text whole, a part (at most 1 MB) at a time. */
export async function wholeText(project: string, id: number): Promise<string> {
  let text = "";
  for (let off = 0; ;) {
    const t = await call<MessageText>("GET", `${projectPath(project)}/messages/${id}?offset=${off}`);
    text += t.message.text;
    if (!t.next || t.next <= off) return text;
    off = t.next;
  }
}
