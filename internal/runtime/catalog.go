package runtime

import "encoding/json"

// ToolSpec describes one troupe tool to an agent: the MCP endpoint and the
// engines that run their own agent loop offer the same catalog.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage // JSON Schema (2020-12) of the arguments object
}

// Catalog lists every tool troupe offers agents. Tools whose service the
// daemon does not run (tasks, memory) answer with an error saying so.
var Catalog = []ToolSpec{
	{"ask_agent", "Ask another agent of your team a question and wait for its answer. The answer is the final output of the turn in which it handles your question (or what it passes to reply). While it works, you wait; if it stays silent for its whole turn_timeout you get a 'no reply' error. If you give wait_seconds and the answer takes longer, you get a request id at once and the answer arrives later in your inbox.",
		json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name, as list_agents shows it"},"question":{"type":"string","description":"what you want to know; say what form of answer you need"},"wait_seconds":{"type":"number","minimum":0,"description":"give up waiting after this many seconds and get the answer in your inbox instead (0 or absent: wait for it)"}},"required":["to","question"],"additionalProperties":false}`)},
	{"reply", "Answer the question you were asked in this turn (an ask_agent from a teammate). Optional: by default your final message of the turn is the answer.",
		json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"your answer"}},"required":["text"],"additionalProperties":false}`)},
	{"send_message", "Send a message to another agent of your team without waiting. It is delivered into its inbox and read at the start of its next turn.",
		json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name"},"text":{"type":"string","description":"the message"}},"required":["to","text"],"additionalProperties":false}`)},
	{"delegate", "Give a task to another agent and carry on. When it finishes, its result arrives in your inbox and wakes you.",
		json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name"},"task":{"type":"string","description":"what to do, and what result to report"}},"required":["to","task"],"additionalProperties":false}`)},
	{"list_agents", "List the agents of your team with their engine and state (idle, busy, stopped, failed, blocked).",
		json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
	{"run_in_background", "Run a shell command in the background. You get a task id at once; when the command ends, a message with its exit code and last lines of output arrives in your inbox and wakes you.",
		json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"a shell command, run with /bin/sh -c"},"cwd":{"type":"string","description":"working directory inside the project (default: the project's folder)"},"timeout_seconds":{"type":"number","minimum":0,"description":"kill the command after this many seconds (0 or absent: no limit)"}},"required":["command"],"additionalProperties":false}`)},
	{"task_status", "Show a background task's state (running, exited, killed, timed_out, ...) and exit code; without task_id, list the project's tasks.",
		json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"additionalProperties":false}`)},
	{"task_output", "Read the end of a background task's output.",
		json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"},"max_bytes":{"type":"integer","minimum":1,"description":"how much of the end to read (default 8000)"}},"required":["task_id"],"additionalProperties":false}`)},
	{"task_kill", "Stop a running background task (SIGTERM, then SIGKILL). Its completion message says it was killed.",
		json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"],"additionalProperties":false}`)},
	{"memory_search", "Search the project's memory notes (.troupe/memory) by words; returns names, descriptions and snippets.",
		json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query"],"additionalProperties":false}`)},
	{"memory_read", "Read one memory note by name.",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)},
	{"memory_write", "Create or replace a memory note: a markdown body with a name, a one-line description and a type (for example project, decision, howto).",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"lower-case words with dashes"},"description":{"type":"string"},"type":{"type":"string"},"body":{"type":"string"}},"required":["name","description","body"],"additionalProperties":false}`)},
}
