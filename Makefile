# troupe — build, run, test, benchmark.
GO      ?= go
BIN     := bin/troupe
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/troupe-dev/troupe/internal/cli.Version=$(VERSION)

# The agent CLIs the tests run, pinned, installed with npm into a cache
# folder outside the repo (once; later runs reuse it). One folder per
# version, so a pin change installs afresh.
TOOLS          ?= $(HOME)/.cache/troupe-tools
CLAUDE_VERSION := 2.1.328
CLAUDE_DIR     := $(TOOLS)/claude-code-$(CLAUDE_VERSION)
CLAUDE_BIN     := $(CLAUDE_DIR)/node_modules/.bin/claude
CODEX_VERSION  := 0.171.0
CODEX_DIR      := $(TOOLS)/codex-$(CODEX_VERSION)
CODEX_BIN      := $(CODEX_DIR)/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
OPENCODE_VERSION := 1.18.33
OPENCODE_DIR   := $(TOOLS)/opencode-$(OPENCODE_VERSION)
OPENCODE_BIN   := $(OPENCODE_DIR)/node_modules/opencode-linux-x64/bin/opencode
# The reference terminal emulator internal/term's differential test and
# benchmark compare with, pinned by internal/term/testdata/xterm's
# package-lock.json (npm ci installs exactly it). One folder per version.
XTERM_VERSION  := 6.0.0
XTERM_PIN      := internal/term/testdata/xterm
XTERM_DIR      := $(TOOLS)/xterm-headless-$(XTERM_VERSION)
XTERM          := $(XTERM_DIR)/node_modules/@xterm/headless/package.json
# The tests find the pinned CLIs and the reference emulator here.
TOOL_ENV       := TROUPE_CLAUDE_BIN=$(CLAUDE_BIN) TROUPE_CODEX_BIN=$(CODEX_BIN) TROUPE_OPENCODE_BIN=$(OPENCODE_BIN) TROUPE_XTERM_DIR=$(XTERM_DIR)

# Where make install puts troupe: $(PREFIX)/bin.
PREFIX  ?= $(HOME)/.local

.PHONY: build install run worktree-demo attempt-demo runner-demo test bench fuzz clean tools web

# The web UI (web/, TypeScript + Preact) bundled by esbuild into
# internal/web/dist, which the binary embeds. `npm ci` runs only when the
# lockfile changed; the bundle is rebuilt only when a source changed. The
# built files are not committed (dist/README is, so `go vet` and `go build`
# work before this runs; such a binary's page says to run `make build`).
WEB_SRC := $(shell find web/src -type f 2>/dev/null) web/build.mjs web/tsconfig.json web/package-lock.json
WEB_OUT := internal/web/dist/index.html

web: $(WEB_OUT)

web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	@touch $@

$(WEB_OUT): web/node_modules/.package-lock.json $(WEB_SRC)
	cd web && npm run --silent check && npm run --silent build

build: web
	@echo "building $(BIN) (the first build downloads modules and takes a minute)..."
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/troupe
	@echo "built $(BIN)"

# troupe on PATH: the built binary into $(PREFIX)/bin (default ~/.local/bin),
# and a word when that folder is not on PATH.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/troupe
	@echo "installed $(DESTDIR)$(PREFIX)/bin/troupe"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "$(PREFIX)/bin is not on your PATH: add it, e.g. echo 'export PATH=$(PREFIX)/bin:\$$PATH' >> ~/.profile, then open a new shell";; esac

# Start the daemon in the foreground with the demo team registered.
run: build
	./$(BIN) serve --project examples/demo

# The worktree demo (examples/worktree-demo/README.md): a throwaway git
# repository of it, served in the foreground (or added to the running daemon).
worktree-demo: build
	TROUPE=$(CURDIR)/$(BIN) examples/worktree-demo/run.sh

# The attempt demo (examples/attempt-demo/README.md): three agents, one
# task, ranked by the check; a throwaway git repository, served likewise.
attempt-demo: build
	TROUPE=$(CURDIR)/$(BIN) examples/attempt-demo/run.sh

# The runner demo (examples/runner-demo/README.md): a daemon and a runner
# on this machine as if they were two, in the foreground until Ctrl-C.
runner-demo: build
	TROUPE=$(CURDIR)/$(BIN) examples/runner-demo/run.sh

tools: $(CLAUDE_BIN) $(CODEX_BIN) $(OPENCODE_BIN) $(XTERM)

$(CLAUDE_BIN):
	mkdir -p $(CLAUDE_DIR)
	npm install --no-audit --no-fund --prefix $(CLAUDE_DIR) @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	$(CLAUDE_BIN) --version

$(CODEX_BIN):
	mkdir -p $(CODEX_DIR)
	npm install --no-audit --no-fund --prefix $(CODEX_DIR) @openai/codex@$(CODEX_VERSION)
	$(CODEX_BIN) --version

$(OPENCODE_BIN):
	mkdir -p $(OPENCODE_DIR)
	npm install --no-audit --no-fund --prefix $(OPENCODE_DIR) opencode-ai@$(OPENCODE_VERSION)
	$(OPENCODE_BIN) --version

$(XTERM): $(XTERM_PIN)/package.json $(XTERM_PIN)/package-lock.json
	mkdir -p $(XTERM_DIR)
	cp $(XTERM_PIN)/package.json $(XTERM_PIN)/package-lock.json $(XTERM_DIR)/
	cd $(XTERM_DIR) && npm ci --no-audit --no-fund
	touch $@

# Besides vet: go.mod and go.sum are what `go mod tidy` makes (-diff
# prints the change and fails, touching nothing); staticcheck (pinned by the
# tool directive in go.mod) reports nothing. A finding that is a justified
# exception gets a `//lint:ignore CHECK reason` at its line. Measured on 2
# shared cores: tidy 0.2 s; staticcheck 1.3 s with its cache warm, 16 s
# after a few packages changed, 67 s with its cache empty (it analyses
# every dependency once), about 5 min on a first run that also downloads
# and builds staticcheck.
test: tools web
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) tool staticcheck ./...
	$(TOOL_ENV) $(GO) test -race -timeout 25m ./...
	$(GO) test -C third_party/vt -race ./...

# The method of BENCHMARKS.md: each benchmark with a fixed number of
# iterations (-benchtime Nx) and three runs (-count 3) unless its line says
# otherwise, into bench.out; then internal/benchreport prints each figure
# (median and range of the runs) with its target, PASS or OVER, and the
# big/small ratios. About 2 minutes on 2 quiet cores, 5 when they are shared.
BENCH = $(TOOL_ENV) $(GO) test -run '^$$' -benchmem -count 3

bench: build tools
	@rm -f bench.out
	$(BENCH) -benchtime 10x -bench '^BenchmarkStartup$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 200x -bench '^BenchmarkTaskExitToOwnerTurn$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 30x -bench '^BenchmarkCheckRun$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 5x -bench '^BenchmarkAttemptThree$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 10x -bench '^BenchmarkWebFirstLoad$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 2x -bench '^BenchmarkWebEventBurst$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 5x -bench '^BenchmarkClaude' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 10x -bench '^Benchmark(CodexWarmTurn|CodexExecPerTurn|OpenCodeWarmTurn)$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -count 1 -benchtime 5x -bench '^BenchmarkOpenCodeRunPerTurn$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -count 1 -benchtime 1x -bench '^BenchmarkIdleAgentsThreadsAndMemory$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -count 1 -benchtime 1x -bench '^BenchmarkQueueDrain$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 30x -bench '^BenchmarkSandboxWarmTurn$$' ./cmd/troupe | tee -a bench.out
	@# Agents on a runner (issue 24): a daemon and a runner process on loopback; ~7 min on shared cores.
	$(BENCH) -benchtime 50x -bench '^BenchmarkRunnerAsk$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -count 1 -benchtime 1x -bench '^Benchmark(RunnerQueueDrain|RunnerIdleAgents)$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -count 1 -benchtime 1x -bench '^BenchmarkSandboxIdleMemory$$' ./cmd/troupe | tee -a bench.out
	$(BENCH) -benchtime 500x -bench '^Benchmark(AskRoundTrip|WakeLatency)$$' ./internal/runtime | tee -a bench.out
	$(BENCH) -benchtime 2x -bench '^BenchmarkSessionStart$$' ./internal/runtime | tee -a bench.out
	$(BENCH) -benchtime 500x -bench '^BenchmarkMCPAskRoundTrip$$' ./internal/mcp | tee -a bench.out
	$(BENCH) -benchtime 2000x -bench '^BenchmarkMCPListAgents$$' ./internal/mcp | tee -a bench.out
	$(BENCH) -benchtime 2000x -bench '^BenchmarkInbox' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -benchtime 200x -bench '^Benchmark(Open|OpenNew|AddProject|FsyncWrite)$$' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -count 1 -benchtime 5x -bench '^BenchmarkOpenChecked$$' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -count 1 -benchtime 200x -bench '^BenchmarkConversationNewest$$' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -benchtime 1000x -bench '^BenchmarkMemorySearch$$' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -count 1 -benchtime 10x -bench '^BenchmarkMemoryFirstSearch$$' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -count 1 -benchtime 200x -bench '^BenchmarkMemoryBriefing$$' ./internal/store/sqlite | tee -a bench.out
	$(BENCH) -benchtime 200x -bench '^BenchmarkTaskExitToNotify$$' ./internal/task | tee -a bench.out
	$(BENCH) -benchtime 50x -bench '^BenchmarkStart$$' ./internal/sandbox | tee -a bench.out
	$(BENCH) -benchtime 2000x -bench '^BenchmarkEchoTurn$$' ./internal/engine/fake | tee -a bench.out
	$(BENCH) -benchtime 2000x -bench '^BenchmarkEchoTurnSandbox$$' ./internal/engine/fake | tee -a bench.out
	$(BENCH) -benchtime 2000x -bench '^BenchmarkLoopStep$$' ./internal/engine/openai | tee -a bench.out
	$(BENCH) -benchtime 200000x -bench '^BenchmarkPublish$$' ./internal/events | tee -a bench.out
	$(BENCH) -benchtime 20x -bench '^BenchmarkServerStart$$' ./internal/bus | tee -a bench.out
	$(BENCH) -benchtime 2000x -bench '^BenchmarkDurablePublish$$' ./internal/bus | tee -a bench.out
	$(BENCH) -benchtime 40x -bench '^BenchmarkFanout$$' ./internal/api | tee -a bench.out
	$(BENCH) -benchtime 3x -bench '^BenchmarkCreate10kFiles$$' ./internal/worktree | tee -a bench.out
	$(BENCH) -benchtime 20x -bench '^BenchmarkCheckpoint$$' ./internal/worktree | tee -a bench.out
	$(BENCH) -benchtime 20x -bench '^BenchmarkSnapshotBundle$$' ./internal/worktree | tee -a bench.out
	$(BENCH) -count 1 -benchtime 3x -bench '^BenchmarkClaude(IndexCold|ListWarm|AppendReread|Restart)$$' ./internal/claudesessions | tee -a bench.out
	$(BENCH) -count 1 -benchtime 1x -bench '^BenchmarkClaudeFullParseBaseline$$' ./internal/claudesessions | tee -a bench.out
	$(BENCH) -count 1 -benchtime 3x -bench '^BenchmarkEmulator$$' ./internal/term | tee -a bench.out
	$(BENCH) -count 1 -benchtime 1x -bench '^BenchmarkIdleTerminals$$' ./internal/term | tee -a bench.out
	$(GO) run ./internal/benchreport bench.out

fuzz:
	$(GO) test ./internal/project -run '^$$' -fuzz FuzzParseTeam -fuzztime 60s
	$(GO) test ./internal/engine/openai -run '^$$' -fuzz FuzzParseArgs -fuzztime 30s
	$(GO) test ./internal/engine/openai -run '^$$' -fuzz FuzzStream -fuzztime 30s

clean:
	rm -rf bin bench.out web/node_modules
	find internal/web/dist -mindepth 1 ! -name README -exec rm -rf {} +
