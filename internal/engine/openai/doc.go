// Package openai is the engine of agents with engine = "openai": any
// OpenAI-compatible Chat Completions server (a hosted API, llama.cpp's
// server, vLLM, Ollama) as a member of a team, with troupe running the
// agent loop itself. There is no child program: a turn is the rendered
// inbox messages as one user message, then model requests (streaming, with
// tool calling) and tool calls in turn until the model answers without a
// call (the turn's end, C7: the stream's own end), reaches max_steps, fails
// or is interrupted.
//
// Options: model (the agent's); [agent.openai] base_url (up to /v1),
// api_key_env (the NAME of the variable holding the key, looked up in the
// agent's env then the daemon's; the key is sent as a bearer token and
// redacted from every error, never logged), max_context_tokens (the
// budget: the request's tokens estimated from its bytes at the rate the
// server last reported, 3 bytes a token before; past it the oldest turns
// are dropped down to three quarters of it, and an EventNotice says so)
// and max_steps.
//
// Tools: troupe's own (StartSpec.Tools, called in process, no MCP) and the
// workspace tools (workspace.go, command.go): read_file, write_file,
// edit_file, list_dir, search_text, run_command, confined to the working
// folder by an os.Root, regular files only, opened without blocking, every
// result bounded; run_command through internal/proc (own process
// group, stop by escalation, output head + tail; under coreutils timeout
// as a backstop 2 s past its limit, so a daemon killed mid-command does not
// leave it running on). A process a command
// takes out of its group (setsid) is not stopped with it, nor waited for
// past a 2 s grace: lasting work belongs in run_in_background, whose
// supervisor stops every descendant. allowed_tools names the tools used
// without asking the person (internal/permission): the workspace tools it
// names are also the only ones the agent has (none named: all six), and it
// may name troupe's own tools that pass the gate (run_in_background,
// memory_write); permission_mode decides what else asks the person first
// (through StartSpec.Approver).
//
// The conversation is kept in a Store (SQLite in the daemon), message by
// message as the turn goes, under an id the session mints and reports as
// an EventSession; StartSpec.Resume continues it after a restart. A call
// left without a result by a crash is answered "not run" when loaded.
//
// Robustness: arguments that are not a JSON object and unknown tools are
// tool errors the model sees; 429, 5xx and unreachable servers are tried
// again with a doubling backoff (bounded; each retry bumps the activity
// token); a 429 whose wait (Retry-After, x-ratelimit-reset-*) is longer
// than 30 s, or that outlasts the retries, ends the turn on a usage limit
// (Event.Limit, with its reset time when the server gave one: the runtime
// waits for it and runs the turn again); other refusals (401, 404) end the
// turn with the server's words;
// a stream that breaks mid-answer ends the turn. Every chunk bumps the
// activity token (C3).
//
// Concurrency: Engine is stateless and safe for concurrent use. A Session
// owns one goroutine that ends it (run: on Close or a death it waits for
// the turn, closes the working folder's root and closes Events) and, while
// a turn runs, the turn's goroutine, which owns the conversation in memory
// and whatever the turn starts (HTTP stream, command child, tool call), all
// under the turn's context: Interrupt and Close cancel it. A session dies
// (Events closes, Err says why, no turn end) only when its conversation
// cannot be stored. Events are buffered; the turn waits for the consumer
// (never drops); after Close undelivered events are dropped.
//
// Who may import: the daemon's wiring (internal/daemon), internal/doctor
// through BaseURL, and tests.
package openai
