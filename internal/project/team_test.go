package project

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/troupe-dev/troupe/internal/troupe"
)

const testTeamFile = ".troupe/team.toml"

// teamAgent returns an troupe.AgentSpec with the defaults ParseTeam applies.
func teamAgent(name string, engine troupe.Engine, line int) troupe.AgentSpec {
	return troupe.AgentSpec{
		Name:        troupe.AgentID(name),
		Engine:      engine,
		Mode:        troupe.ModeStructured,
		TurnTimeout: troupe.DefaultTurnTimeout,
		IdleTimeout: troupe.DefaultIdleTimeout,
		ToolTimeout: troupe.DefaultToolTimeout,
		Line:        line,
	}
}

// withSpec returns a after applying f, for table literals.
func withSpec(a troupe.AgentSpec, f func(*troupe.AgentSpec)) troupe.AgentSpec {
	f(&a)
	return a
}

var goodTeams = []struct {
	name string
	src  string
	want []troupe.AgentSpec
}{
	{"empty file", "", nil},
	{"only comments and blank lines", "# the team\n\n   \n# nobody yet\n", nil},
	{
		"minimal agent gets defaults",
		"[[agent]]\nname = \"lead\"\nengine = \"claude\"\n",
		[]troupe.AgentSpec{teamAgent("lead", troupe.EngineClaude, 1)},
	},
	{
		"every key",
		`# A team of two.

[[agent]]
name = "lead"
engine = "claude"
model = "opus"
mode = "terminal"
turn_timeout = "1h30m"
idle_timeout = "2h"
tool_timeout = "45m"
prompt = "You lead."
allowed_tools = ["Read", "Edit"]
env = { GOFLAGS = "-count=1", _X1 = "" }

[agent.claude]
permission_mode = "plan"
max_turns = 3
nested = { a = [1, 2] }

[[agent]]
name = "reviewer-2"
engine = "fake"
prompt_file = "prompts/review.md"

[agent.env]
HOME = "/tmp/home"
`,
		[]troupe.AgentSpec{
			withSpec(teamAgent("lead", troupe.EngineClaude, 3), func(a *troupe.AgentSpec) {
				a.Model = "opus"
				a.Mode = troupe.ModeTerminal
				a.TurnTimeout = 90 * time.Minute
				a.IdleTimeout = 2 * time.Hour
				a.ToolTimeout = 45 * time.Minute
				a.Prompt = "You lead."
				a.AllowedTools = []string{"Read", "Edit"}
				a.Env = map[string]string{"GOFLAGS": "-count=1", "_X1": ""}
				a.Options = map[string]any{
					"permission_mode": "plan",
					"max_turns":       int64(3),
					"nested":          map[string]any{"a": []any{int64(1), int64(2)}},
				}
			}),
			withSpec(teamAgent("reviewer-2", troupe.EngineFake, 20), func(a *troupe.AgentSpec) {
				a.PromptFile = "prompts/review.md"
				a.Env = map[string]string{"HOME": "/tmp/home"}
			}),
		},
	},
	{
		"explicit structured mode and 24h limit",
		"[[agent]]\nname = \"a\"\nengine = \"codex\"\nmode = \"structured\"\nturn_timeout = \"24h\"\n",
		[]troupe.AgentSpec{withSpec(teamAgent("a", troupe.EngineCodex, 1), func(a *troupe.AgentSpec) { a.TurnTimeout = 24 * time.Hour })},
	},
	{
		"idle_timeout 0 keeps the session",
		"[[agent]]\nname = \"a\"\nengine = \"fake\"\nidle_timeout = \"0\"\n",
		[]troupe.AgentSpec{withSpec(teamAgent("a", troupe.EngineFake, 1), func(a *troupe.AgentSpec) { a.IdleTimeout = 0 })},
	},
	{
		"empty tools and env are kept, not dropped",
		"[[agent]]\nname = \"a\"\nengine = \"acp\"\nallowed_tools = []\nenv = {}\n",
		[]troupe.AgentSpec{withSpec(teamAgent("a", troupe.EngineACP, 1), func(a *troupe.AgentSpec) {
			a.AllowedTools = []string{}
			a.Env = map[string]string{}
		})},
	},
	{
		"dotted keys for env and engine options",
		"[[agent]]\nname = \"a\"\nengine = \"openai\"\nenv.A = \"1\"\nenv.B = \"2\"\nopenai.base_url = \"http://localhost\"\n",
		[]troupe.AgentSpec{withSpec(teamAgent("a", troupe.EngineOpenAI, 1), func(a *troupe.AgentSpec) {
			a.Env = map[string]string{"A": "1", "B": "2"}
			a.Options = map[string]any{"base_url": "http://localhost"}
		})},
	},
	{
		"inline engine options",
		"[[agent]]\nname = \"a\"\nengine = \"opencode\"\nopencode = { agent = \"build\" }\n",
		[]troupe.AgentSpec{withSpec(teamAgent("a", troupe.EngineOpenCode, 1), func(a *troupe.AgentSpec) {
			a.Options = map[string]any{"agent": "build"}
		})},
	},
	{
		"engine table before the engine key",
		"[[agent]]\nname = \"a\"\nfake.script = \"echo\"\nengine = \"fake\"\n",
		[]troupe.AgentSpec{withSpec(teamAgent("a", troupe.EngineFake, 1), func(a *troupe.AgentSpec) {
			a.Options = map[string]any{"script": "echo"}
		})},
	},
	{
		"longest and shortest names",
		"[[agent]]\nname = \"" + strings.Repeat("a", 63) + "\"\nengine = \"fake\"\n[[agent]]\nname = \"0\"\nengine = \"fake\"\n[[agent]]\nname = \"9a_b-c\"\nengine = \"fake\"\n",
		[]troupe.AgentSpec{
			teamAgent(strings.Repeat("a", 63), troupe.EngineFake, 1),
			teamAgent("0", troupe.EngineFake, 4),
			teamAgent("9a_b-c", troupe.EngineFake, 7),
		},
	},
	{
		"byte order mark and CRLF line ends",
		"\xef\xbb\xbf# team\r\n\r\n[[agent]]\r\nname = \"a\"\r\nengine = \"fake\"\r\n",
		[]troupe.AgentSpec{teamAgent("a", troupe.EngineFake, 3)},
	},
	{
		"multi-line prompt that looks like TOML",
		"[[agent]]\nname = \"a\"\nengine = \"fake\"\nprompt = \"\"\"\n[[agent]]\nname = \"b\"\n\"\"\"\n\n[[agent]]\nname = \"c\"\nengine = \"fake\"\n",
		[]troupe.AgentSpec{
			withSpec(teamAgent("a", troupe.EngineFake, 1), func(a *troupe.AgentSpec) { a.Prompt = "[[agent]]\nname = \"b\"\n" }),
			teamAgent("c", troupe.EngineFake, 9),
		},
	},
}

func TestParseTeamGood(t *testing.T) {
	for _, tt := range goodTeams {
		t.Run(tt.name, func(t *testing.T) {
			team, err := ParseTeam(testTeamFile, []byte(tt.src))
			if err != nil {
				t.Fatalf("ParseTeam: %v", err)
			}
			if !reflect.DeepEqual(team.Agents, tt.want) {
				t.Errorf("agents:\ngot  %#v\nwant %#v", team.Agents, tt.want)
			}
		})
	}
}

// leadHead is a valid start of an agent, for bad files that break a later key.
const leadHead = "[[agent]]\nname = \"lead\"\nengine = \"fake\"\n"

var badTeams = []struct {
	name string
	src  string
	want string
}{
	// TOML syntax.
	{"unterminated string", "[[agent]]\nname = \"lead\nengine = \"fake\"\n",
		`.troupe/team.toml:2: syntax error: strings cannot contain newlines`},
	{"unclosed array table header", "[[agent]\nname = \"lead\"\n",
		`.troupe/team.toml:1: syntax error: expected end of table array name delimiter ']', but got '\n' instead`},
	{"key without value", leadHead + "model\n",
		`.troupe/team.toml:4: syntax error: expected '.' or '=', but got '\n' instead`},
	{"duplicate key in one agent", leadHead + "name = \"other\"\n",
		`.troupe/team.toml:4: syntax error: Key 'agent.name' has already been defined.`},
	{"two values on a line", leadHead + "model = \"a\" \"b\"\n",
		`.troupe/team.toml:4: syntax error: expected a top-level item to end with a newline, comment, or EOF, but got '"' instead`},
	{"NUL bytes", "\x00\x00",
		`.troupe/team.toml:1: syntax error: files cannot contain NULL bytes; probably using UTF-16; TOML files must be UTF-8`},

	// Top level.
	{"unknown top-level key", "version = 1\n" + leadHead,
		`.troupe/team.toml:1: version: unknown top-level key: a team file holds [[agent]] tables and a [checks] table`},
	{"unknown top-level table", leadHead + "[team]\nname = \"x\"\n",
		`.troupe/team.toml:4: team: unknown top-level key: a team file holds [[agent]] tables and a [checks] table`},
	{"quoted top-level key", "\"my team\" = 1\n",
		`.troupe/team.toml:1: "my team": unknown top-level key: a team file holds [[agent]] tables and a [checks] table`},
	{"single [agent] table", "# one\n[agent]\nname = \"lead\"\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent: write each agent as an [[agent]] table, with double brackets`},
	{"inline array of agents", "agent = [{ name = \"lead\", engine = \"fake\" }]\n",
		`.troupe/team.toml:1: agent: write each agent as an [[agent]] table, with double brackets`},
	{"agent as a string", "agent = \"lead\"\n",
		`.troupe/team.toml:1: agent: write each agent as an [[agent]] table, with double brackets`},

	// name.
	{"missing name", "[[agent]]\nengine = \"fake\"\n",
		`.troupe/team.toml:1: agent #1: name: missing: every agent needs one, like name = "lead"`},
	{"missing name in second agent", leadHead + "\n[[agent]]\nengine = \"fake\"\nmodel = 1\n",
		`.troupe/team.toml:5: agent #2: name: missing: every agent needs one, like name = "lead"`},
	{"empty name", "[[agent]]\nname = \"\"\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent #1: name: must not be empty: use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit`},
	{"name not a string", "[[agent]]\nname = 7\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent #1: name: must be a string, not an integer: write it like name = "lead"`},
	{"upper-case name", "[[agent]]\nname = \"Lead\"\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent #1: name: bad name "Lead": use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit`},
	{"name starting with a dash", "[[agent]]\nname = \"-x\"\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent #1: name: bad name "-x": use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit`},
	{"name too long", "[[agent]]\nname = \"" + strings.Repeat("a", 64) + "\"\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent #1: name: bad name "` + strings.Repeat("a", 64) + `": use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit`},
	{"name with a space", "[[agent]]\nname = \"lead dev\"\nengine = \"fake\"\n",
		`.troupe/team.toml:2: agent #1: name: bad name "lead dev": use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit`},
	{"duplicate name", leadHead + "\n[[agent]]\nname = \"lead\"\nengine = \"claude\"\n",
		`.troupe/team.toml:6: agent "lead": name: duplicate name "lead": the agent on line 1 has it too; give each agent a unique name`},

	// engine.
	{"missing engine", "[[agent]]\nname = \"lead\"\n",
		`.troupe/team.toml:1: agent "lead": engine: missing: set it to one of claude, codex, opencode, acp, openai, terminal, fake`},
	{"unknown engine", "[[agent]]\nname = \"lead\"\nengine = \"gpt\"\n",
		`.troupe/team.toml:3: agent "lead": engine: unknown engine "gpt": use one of claude, codex, opencode, acp, openai, terminal, fake`},
	{"engine in the wrong case", "[[agent]]\nname = \"lead\"\nengine = \"Claude\"\n",
		`.troupe/team.toml:3: agent "lead": engine: unknown engine "Claude": use one of claude, codex, opencode, acp, openai, terminal, fake`},
	{"engine not a string", "[[agent]]\nname = \"lead\"\nengine = [\"fake\"]\n",
		`.troupe/team.toml:3: agent "lead": engine: must be a string, not an array: write it like engine = "claude"`},

	// model and mode.
	{"model not a string", leadHead + "model = 4.5\n",
		`.troupe/team.toml:4: agent "lead": model: must be a string, not a float: write it like model = "sonnet"`},
	{"unknown mode", leadHead + "mode = \"tui\"\n",
		`.troupe/team.toml:4: agent "lead": mode: unknown mode "tui": use "structured" (the default) or "terminal"`},
	{"mode not a string", leadHead + "mode = true\n",
		`.troupe/team.toml:4: agent "lead": mode: must be a string, not a boolean: write it like mode = "terminal"`},

	// turn_timeout.
	{"duration in words", leadHead + "turn_timeout = \"10 minutes\"\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: bad duration "10 minutes": write it like "10m" or "1h30m"`},
	{"duration in days", leadHead + "turn_timeout = \"1d\"\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: bad duration "1d": write it like "10m" or "1h30m"`},
	{"empty duration", leadHead + "turn_timeout = \"\"\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: bad duration "": write it like "10m" or "1h30m"`},
	{"zero duration", leadHead + "turn_timeout = \"0s\"\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: duration "0s" is not positive: write it like "10m" or "1h30m"`},
	{"negative duration", leadHead + "turn_timeout = \"-5m\"\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: duration "-5m" is not positive: write it like "10m" or "1h30m"`},
	{"duration over a day", leadHead + "turn_timeout = \"24h0m1s\"\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: duration "24h0m1s" is longer than 24h: use at most "24h"`},
	{"duration as a number", leadHead + "turn_timeout = 600\n",
		`.troupe/team.toml:4: agent "lead": turn_timeout: must be a string, not an integer: write it like turn_timeout = "10m"`},

	// idle_timeout: like turn_timeout, but "0" (never) is taken.
	{"idle duration in words", leadHead + "idle_timeout = \"half an hour\"\n",
		`.troupe/team.toml:4: agent "lead": idle_timeout: bad duration "half an hour": write it like "10m" or "1h30m", or "0" for never`},
	{"negative idle duration", leadHead + "idle_timeout = \"-1s\"\n",
		`.troupe/team.toml:4: agent "lead": idle_timeout: duration "-1s" is not positive: write it like "10m" or "1h30m", or "0" for never`},
	{"idle duration over a day", leadHead + "idle_timeout = \"25h\"\n",
		`.troupe/team.toml:4: agent "lead": idle_timeout: duration "25h" is longer than 24h: use at most "24h"`},
	{"idle duration as a number", leadHead + "idle_timeout = 0\n",
		`.troupe/team.toml:4: agent "lead": idle_timeout: must be a string, not an integer: write it like idle_timeout = "10m"`},

	// prompt and prompt_file.
	{"prompt and prompt_file", leadHead + "prompt = \"hi\"\nprompt_file = \"p.md\"\n",
		`.troupe/team.toml:5: agent "lead": prompt_file: cannot be used with prompt: keep one of them`},
	{"prompt_file and prompt", leadHead + "prompt_file = \"p.md\"\nmodel = \"m\"\nprompt = \"hi\"\n",
		`.troupe/team.toml:6: agent "lead": prompt: cannot be used with prompt_file: keep one of them`},
	{"prompt not a string", leadHead + "prompt = [\"a\", \"b\"]\n",
		`.troupe/team.toml:4: agent "lead": prompt: must be a string, not an array: write it like prompt = "You review code."`},
	{"prompt_file not a string", leadHead + "prompt_file = { path = \"p.md\" }\n",
		`.troupe/team.toml:4: agent "lead": prompt_file: must be a string, not a table: write it like prompt_file = "prompts/lead.md"`},

	// allowed_tools.
	{"tools as a string", leadHead + "allowed_tools = \"Read\"\n",
		`.troupe/team.toml:4: agent "lead": allowed_tools: must be an array of strings, not a string: write it like allowed_tools = ["Read", "Edit"]`},
	{"tools with a number", leadHead + "allowed_tools = [\n  \"Read\",\n  2,\n]\n",
		`.troupe/team.toml:4: agent "lead": allowed_tools: must be an array of strings, but item 2 is an integer: write it like allowed_tools = ["Read", "Edit"]`},
	{"tools as tables", leadHead + "[[agent.allowed_tools]]\nname = \"Read\"\n",
		`.troupe/team.toml:4: agent "lead": allowed_tools: must be an array of strings, not an array of tables: write it like allowed_tools = ["Read", "Edit"]`},

	// permission_mode, command, args.
	{"permission mode as a number", leadHead + "permission_mode = 3\n",
		`.troupe/team.toml:4: agent "lead": permission_mode: must be a string, not an integer: write it like permission_mode = "acceptEdits"`},
	{"empty permission mode", leadHead + "permission_mode = \"\"\n",
		`.troupe/team.toml:4: agent "lead": permission_mode: must not be empty: remove it for the engine's default, or name a mode like "acceptEdits"`},
	{"blank command", leadHead + "command = \" \"\n",
		`.troupe/team.toml:4: agent "lead": command: must not be empty: remove it to run the engine's CLI from PATH, or give the program's path`},
	{"args as a string", leadHead + "args = \"-v\"\n",
		`.troupe/team.toml:4: agent "lead": args: must be an array of strings, not a string: write it like args = ["--verbose"]`},

	// env.
	{"env as a string", leadHead + "env = \"A=1\"\n",
		`.troupe/team.toml:4: agent "lead": env: must be a table of strings, not a string: write it like env = { NAME = "value" }`},
	{"env variable starting with a digit", leadHead + "env = { OK = \"1\", 2FA = \"x\" }\n",
		`.troupe/team.toml:4: agent "lead": env: bad variable name "2FA": use letters, digits and '_', not starting with a digit`},
	{"env variable with a dash", leadHead + "[agent.env]\nOK = \"1\"\nMY-VAR = \"x\"\n",
		`.troupe/team.toml:6: agent "lead": env: bad variable name "MY-VAR": use letters, digits and '_', not starting with a digit`},
	{"env variable quoted with a space", leadHead + "env.\"A B\" = \"x\"\n",
		`.troupe/team.toml:4: agent "lead": env: bad variable name "A B": use letters, digits and '_', not starting with a digit`},
	{"env value a number", leadHead + "[agent.env]\nPORT = 8080\n",
		`.troupe/team.toml:5: agent "lead": env: variable PORT must be a string, not an integer: write it like PORT = "value"`},
	{"env value a table", leadHead + "[agent.env.SUB]\nX = \"1\"\n",
		`.troupe/team.toml:4: agent "lead": env: variable SUB must be a string, not a table: write it like SUB = "value"`},

	// Unknown keys and engine tables.
	{"unknown key", leadHead + "temperature = 0.2\n",
		`.troupe/team.toml:4: agent "lead": temperature: unknown key: an agent may set name, engine, model, mode, turn_timeout, idle_timeout, tool_timeout, prompt, prompt_file, allowed_tools, permission_mode, env, command, args, workspace, base, sandbox, runner, runner_labels, profile and an [agent.<engine>] table of engine options`},
	{"key in the wrong case", leadHead + "Model = \"x\"\n",
		`.troupe/team.toml:4: agent "lead": Model: unknown key: did you mean model?`},
	{"key with a dash", leadHead + "turn-timeout = \"5m\"\n",
		`.troupe/team.toml:4: agent "lead": turn-timeout: unknown key: did you mean turn_timeout?`},
	{"quoted unknown key", leadHead + "\"allowed tools\" = []\n",
		`.troupe/team.toml:4: agent "lead": "allowed tools": unknown key: an agent may set name, engine, model, mode, turn_timeout, idle_timeout, tool_timeout, prompt, prompt_file, allowed_tools, permission_mode, env, command, args, workspace, base, sandbox, runner, runner_labels, profile and an [agent.<engine>] table of engine options`},
	{"unknown sub-table", leadHead + "\n[agent.settings]\nx = 1\n",
		`.troupe/team.toml:5: agent "lead": settings: unknown key: an agent may set name, engine, model, mode, turn_timeout, idle_timeout, tool_timeout, prompt, prompt_file, allowed_tools, permission_mode, env, command, args, workspace, base, sandbox, runner, runner_labels, profile and an [agent.<engine>] table of engine options`},
	{"engine table in the wrong case", leadHead + "[agent.Fake]\nx = 1\n",
		`.troupe/team.toml:4: agent "lead": Fake: unknown key: did you mean fake?`},
	{"table for another engine", leadHead + "\n[agent.claude]\nmodel = \"opus\"\n",
		`.troupe/team.toml:5: agent "lead": claude: options for engine "claude", but this agent's engine is "fake": rename the table to [agent.fake] or remove it`},
	{"dotted options for another engine", "[[agent]]\nname = \"lead\"\ncodex.profile = \"x\"\nengine = \"fake\"\n",
		`.troupe/team.toml:3: agent "lead": codex: options for engine "codex", but this agent's engine is "fake": rename the table to [agent.fake] or remove it`},
	{"engine options not a table", leadHead + "fake = \"fast\"\n",
		`.troupe/team.toml:4: agent "lead": fake: must be a table of options for engine "fake", not a string: write it as an [agent.fake] table`},
	{"engine options as an array of tables", leadHead + "[[agent.fake]]\nx = 1\n",
		`.troupe/team.toml:4: agent "lead": fake: must be a table of options for engine "fake", not an array of tables: write it as an [agent.fake] table`},

	// The first problem in file order wins.
	{"missing name before a later bad key", "[[agent]]\nfoo = 1\nengine = \"fake\"\n",
		`.troupe/team.toml:1: agent #1: name: missing: every agent needs one, like name = "lead"`},
	{"first of two bad keys", leadHead + "mode = \"x\"\nturn_timeout = \"x\"\n",
		`.troupe/team.toml:4: agent "lead": mode: unknown mode "x": use "structured" (the default) or "terminal"`},
	{"bad key before a bad name", "[[agent]]\nengine = \"fake\"\nmode = \"x\"\nname = \"Bad\"\n",
		`.troupe/team.toml:3: agent #1: mode: unknown mode "x": use "structured" (the default) or "terminal"`},
	{"unknown engine after an engine table", "[[agent]]\nname = \"lead\"\nclaude.x = 1\nengine = \"bogus\"\n",
		`.troupe/team.toml:4: agent "lead": engine: unknown engine "bogus": use one of claude, codex, opencode, acp, openai, terminal, fake`},
	{"first bad env entry", leadHead + "env = { 1A = \"x\", 2B = \"y\" }\n",
		`.troupe/team.toml:4: agent "lead": env: bad variable name "1A": use letters, digits and '_', not starting with a digit`},
	{"error after a multi-line string", leadHead + "prompt = '''\n[[agent]]\nname = 1\n'''\nmode = 'x'\n",
		`.troupe/team.toml:8: agent "lead": mode: unknown mode "x": use "structured" (the default) or "terminal"`},
	{"error after a multi-line array", leadHead + "allowed_tools = [\n  \"a\", # first\n  \"b\",\n]\nmodel = 1\n",
		`.troupe/team.toml:8: agent "lead": model: must be a string, not an integer: write it like model = "sonnet"`},
}

func TestParseTeamBad(t *testing.T) {
	for _, tt := range badTeams {
		t.Run(tt.name, func(t *testing.T) {
			team, err := ParseTeam(testTeamFile, []byte(tt.src))
			if err == nil {
				t.Fatalf("ParseTeam succeeded with %d agents; want error %q", len(team.Agents), tt.want)
			}
			if team != nil {
				t.Errorf("ParseTeam returned a team with its error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\ngot  %s\nwant %s", got, tt.want)
			}
			var fe *troupe.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, want *troupe.FieldError", err)
			}
			if fe.File != testTeamFile || fe.Line <= 0 {
				t.Errorf("File, Line = %q, %d; want %q and a line", fe.File, fe.Line, testTeamFile)
			}
			if !errors.Is(err, troupe.ErrInvalid) {
				t.Errorf("error does not match troupe.ErrInvalid")
			}
		})
	}
}

func TestParseTeamErrorFields(t *testing.T) {
	_, err := ParseTeam("team.toml", []byte(leadHead+"\n\nturn_timeout = \"soon\"\n"))
	want := &troupe.FieldError{
		File:  "team.toml",
		Line:  6,
		Field: `agent "lead": turn_timeout`,
		Msg:   `bad duration "soon": write it like "10m" or "1h30m"`,
	}
	var fe *troupe.FieldError
	if !errors.As(err, &fe) || *fe != *want {
		t.Errorf("ParseTeam error = %#v, want %#v", err, want)
	}
}

func FuzzParseTeam(f *testing.F) {
	for _, tt := range goodTeams {
		f.Add([]byte(tt.src))
	}
	for _, tt := range badTeams {
		f.Add([]byte(tt.src))
	}
	for _, src := range trickyTOML {
		f.Add([]byte(src))
	}
	for _, src := range []string{"[checks]\ntest.command = \"x\"\n", "checks = { test = { command = \"x\" } }\n", "[checks.a]\ncommand = \"x\"\ndir = \"b/../c\"\n"} {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		team, err := ParseTeam(testTeamFile, data)
		if err != nil {
			if team != nil {
				t.Fatalf("ParseTeam returned a team with error %v", err)
			}
			var fe *troupe.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, want *troupe.FieldError: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), testTeamFile) {
				t.Fatalf("error does not start with the file name: %v", err)
			}
		} else {
			for _, a := range team.Agents {
				if !namePattern.MatchString(string(a.Name)) || a.Line <= 0 ||
					a.TurnTimeout <= 0 || a.TurnTimeout > maxTurnTimeout {
					t.Fatalf("invalid agent accepted: %+v", a)
				}
			}
		}
		// An engine's check is reported like a parse error.
		if _, err := ParseTeamChecked(testTeamFile, data, checkFake); err != nil {
			if fe, ok := errors.AsType[*troupe.FieldError](err); !ok || fe.File != testTeamFile {
				t.Fatalf("checked error is %T, want a *troupe.FieldError naming the file: %v", err, err)
			}
		}
		// Whenever the TOML is valid, the scanner must find its keys, or
		// errors lose their lines.
		var raw map[string]any
		if md, err := toml.Decode(string(data), &raw); err == nil && len(md.Keys()) > 0 && keyLines(string(data), md.Keys()) == nil {
			var got []toml.Key
			for _, k := range scanKeys(string(data)) {
				got = append(got, k.key)
			}
			t.Fatalf("scanned keys %q, decoded %q", got, md.Keys())
		}
	})
}

// checkFake stands for the fake engine's Check: its only option is respond,
// a string, and it has no terminal mode.
func checkFake(a troupe.AgentSpec) error {
	if a.Mode == troupe.ModeTerminal {
		return &troupe.FieldError{Field: "mode", Msg: `engine fake has no terminal mode: remove mode or set it to "structured"`}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Options)) {
		if k != "respond" {
			return &troupe.FieldError{Field: "fake." + k, Msg: "unknown option: did you mean respond?"}
		}
	}
	if v, ok := a.Options["respond"]; ok {
		if _, ok := v.(string); !ok {
			return fmt.Errorf("check agent %s: %w", a.Name, &troupe.FieldError{Field: "fake.respond", Msg: "must be a string"})
		}
	}
	return nil
}

// needsRespond is a check that wants fake.respond set.
func needsRespond(a troupe.AgentSpec) error {
	if _, ok := a.Options["respond"]; !ok {
		return &troupe.FieldError{Field: "fake.respond", Msg: `missing: set it, like respond = "ok"`}
	}
	return nil
}

func TestParseTeamChecked(t *testing.T) {
	down := func(troupe.AgentSpec) error { return errors.New("engine fake is not installed: install it") }
	tests := []struct {
		name  string
		check func(troupe.AgentSpec) error
		src   string
		want  string // "" for no error
	}{
		{"good options", checkFake, leadHead + "[agent.fake]\nrespond = \"ok\"\n", ""},
		{"no check", nil, leadHead + "mode = \"terminal\"\n", ""},
		{"typo in the engine table", checkFake, leadHead + "\n[agent.fake]\nrespond = \"ok\"\nrespnd = \"x\"\n",
			`.troupe/team.toml:7: agent "lead": fake.respnd: unknown option: did you mean respond?`},
		{"typo as a dotted key", checkFake, leadHead + "model = \"m\"\nfake.respnd = \"x\"\n",
			`.troupe/team.toml:5: agent "lead": fake.respnd: unknown option: did you mean respond?`},
		{"typo in an inline table", checkFake, leadHead + "fake = {\n  respnd = \"x\",\n}\n",
			`.troupe/team.toml:5: agent "lead": fake.respnd: unknown option: did you mean respond?`},
		{"terminal mode refused", checkFake, leadHead + "prompt = \"hi\"\nmode = \"terminal\"\n",
			`.troupe/team.toml:5: agent "lead": mode: engine fake has no terminal mode: remove mode or set it to "structured"`},
		{"wrapped field error", checkFake, leadHead + "[agent.fake]\nrespond = 3\n",
			`.troupe/team.toml:5: agent "lead": fake.respond: must be a string`},
		{"missing option: the engine table's line", needsRespond, leadHead + "model = \"m\"\n[agent.fake]\nother = 1\n",
			`.troupe/team.toml:5: agent "lead": fake.respond: missing: set it, like respond = "ok"`},
		{"missing option, no table: the header's line", needsRespond, "# team\n" + leadHead,
			`.troupe/team.toml:2: agent "lead": fake.respond: missing: set it, like respond = "ok"`},
		{"plain error: the engine key", down, "[[agent]]\nname = \"lead\"\nmodel = \"m\"\nengine = \"fake\"\n",
			`.troupe/team.toml:4: agent "lead": engine: engine fake is not installed: install it`},
		{"second agent", checkFake, leadHead + "\n[[agent]]\nname = \"b\"\nengine = \"fake\"\nmode = \"terminal\"\n",
			`.troupe/team.toml:8: agent "b": mode: engine fake has no terminal mode: remove mode or set it to "structured"`},
		{"parse errors come first", checkFake, leadHead + "mode = \"terminal\"\nturn_timeout = \"x\"\n",
			`.troupe/team.toml:5: agent "lead": turn_timeout: bad duration "x": write it like "10m" or "1h30m"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			team, err := ParseTeamChecked(testTeamFile, []byte(tt.src), tt.check)
			if tt.want == "" {
				if err != nil || team == nil {
					t.Fatalf("ParseTeamChecked: %v", err)
				}
				return
			}
			if err == nil || team != nil {
				t.Fatalf("ParseTeamChecked = %v, %v; want error %q", team, err, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\ngot  %s\nwant %s", got, tt.want)
			}
			if _, ok := errors.AsType[*troupe.FieldError](err); !ok {
				t.Errorf("error is %T, want *troupe.FieldError", err)
			}
		})
	}
}

func TestParseTeamCheckedSeesEveryAgent(t *testing.T) {
	var seen []troupe.AgentID
	_, err := ParseTeamChecked(testTeamFile, []byte(leadHead+"[[agent]]\nname = \"b\"\nengine = \"codex\"\n"), func(a troupe.AgentSpec) error {
		seen = append(seen, a.Name)
		return nil
	})
	if err != nil || !slices.Equal(seen, []troupe.AgentID{"lead", "b"}) {
		t.Fatalf("checked %v, err %v; want lead and b", seen, err)
	}
}

func TestParseTeamCommandArgsPermissionMode(t *testing.T) {
	team, err := ParseTeam("team.toml", []byte(`[[agent]]
name = "lead"
engine = "claude"
permission_mode = "acceptEdits"
command = "/opt/claude/bin/claude"
args = ["--verbose", "--debug"]
`))
	if err != nil {
		t.Fatal(err)
	}
	a := team.Agents[0]
	if a.PermissionMode != "acceptEdits" || a.Command != "/opt/claude/bin/claude" || strings.Join(a.Args, " ") != "--verbose --debug" {
		t.Errorf("agent = %+v", a)
	}
}
