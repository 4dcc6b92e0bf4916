# troupe — build, run, test, benchmark.
GO      ?= go
BIN     := bin/troupe
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/troupe-dev/troupe/internal/cli.Version=$(VERSION)

.PHONY: build run test bench fuzz clean

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/troupe

# Start the daemon in the foreground with the demo team registered.
run: build
	./$(BIN) serve --project examples/demo

test:
	$(GO) vet ./...
	$(GO) test -race -timeout 12m ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./... | tee bench.out

fuzz:
	$(GO) test ./internal/project -run '^$$' -fuzz FuzzParseTeam -fuzztime 60s

clean:
	rm -rf bin bench.out
