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

.PHONY: build run test bench fuzz clean tools

build:
	@echo "building $(BIN) (the first build downloads modules and takes a minute)..."
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/troupe
	@echo "built $(BIN)"

# Start the daemon in the foreground with the demo team registered.
run: build
	./$(BIN) serve --project examples/demo

tools: $(CLAUDE_BIN)

$(CLAUDE_BIN):
	mkdir -p $(CLAUDE_DIR)
	npm install --no-audit --no-fund --prefix $(CLAUDE_DIR) @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	$(CLAUDE_BIN) --version

test: tools
	$(GO) vet ./...
	TROUPE_CLAUDE_BIN=$(CLAUDE_BIN) $(GO) test -race -timeout 12m ./...

bench: build tools
	TROUPE_CLAUDE_BIN=$(CLAUDE_BIN) $(GO) test -run '^$$' -bench . -benchmem ./... | tee bench.out

fuzz:
	$(GO) test ./internal/project -run '^$$' -fuzz FuzzParseTeam -fuzztime 60s

clean:
	rm -rf bin bench.out
