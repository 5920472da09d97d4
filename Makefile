# Tributary — the two commands that matter are `make local` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
ROOT      := $(CURDIR)
FUNCTIONS := $(notdir $(wildcard functions/*))
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE       := .tools/bin/aws-lambda-rie
MOTO      := .venv/bin/moto_server
MOTO_VERSION := 5.2.5
CDK_OUT   := infra/cdk.out/Tributary.template.json
GO_SOURCES := $(shell find functions pkg -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum
INFRA_SOURCES := $(shell find infra -maxdepth 1 -name '*.go' -not -name '*_test.go' 2>/dev/null) infra/go.mod infra/go.sum infra/cdk.json infra/pipeline.json
export CDK_DISABLE_CLI_TELEMETRY := true
# jsii prints a banner on Node versions it no longer lists; the app works on them.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
export TRIBUTARY_ROOT := $(ROOT)

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

## ---- the two commands -------------------------------------------------------

.PHONY: local
local: deps functions-local synth ## run the whole topology locally, send sample traffic, print results, exit
	$(GO) run ./cmd/local run

.PHONY: test
test: deps functions-local synth ## run every test (Go packages, end-to-end under RIE against moto, CDK assertions)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...
	cd infra && $(GO) test -count=1 -timeout 10m ./...

## ---- more ------------------------------------------------------------------

.PHONY: local-up
local-up: deps functions-local synth ## keep the local topology running until Ctrl-C, for exploring
	$(GO) run ./cmd/local up

.PHONY: logs
logs: ## print the functions' logs and metrics from the running local stand-in
	$(GO) run ./cmd/local logs

.PHONY: results
results: ## a key's windows from the running make local-up: make results KEY=user-1 [FROM=2h] [TO=now] [FOLLOW=1]
	AWS_ENDPOINT_URL=http://$(or $(TRIBUTARY_STANDIN_ADDR),127.0.0.1:4566) AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_PROFILE= \
	  $(GO) run ./cmd/results -template $(CDK_OUT) -stack $(or $(STACK),Tributary) \
	  $(if $(KEY),-key '$(KEY)') $(if $(FROM),-from '$(FROM)') $(if $(TO),-to '$(TO)') $(if $(FOLLOW),-follow)

.PHONY: bench
bench: deps ## cost, throughput, binaries, worker idempotency, ingest and enrichment, CEP and the stream join against their peers, side by side, and event-sourced commands (BENCH lines, about 20 min)
	$(GO) run ./bench/cost -events 1000 -batches 100,1000
	$(GO) run ./bench/throughput
	$(GO) run ./bench/binary
	$(GO) run ./bench/worker
	$(GO) run ./bench/ingest
	$(GO) run ./bench/enrich
	$(GO) run ./bench/cep
	$(GO) run ./bench/es

.PHONY: bench-full
bench-full: deps ## the whole cost matrix: 1,000 and 10,000 events x batch 100 and 1,000 (about 12 min on moto)
	$(GO) run ./bench/cost
	$(GO) run ./bench/throughput
	$(GO) run ./bench/binary
	$(GO) run ./bench/worker
	$(GO) run ./bench/ingest
	$(GO) run ./bench/enrich
	$(GO) run ./bench/cep
	$(GO) run ./bench/es

.PHONY: soak
soak: deps ## the fault-injection harness with many more seeded scenarios than make test (about 10 min)
	$(GO) test -count=1 -timeout 60m -run FaultInjection ./pkg/aggregate -args -fault.seeds=60

FUZZTIME  ?= 30s
FUZZFLAGS ?=

.PHONY: fuzz
fuzz: ## run every fuzz target (each func Fuzz* in a *_test.go) for FUZZTIME each (default 30s)
	@targets=$$(for d in $$($(GO) list -f '{{.Dir}}' ./...); do \
		grep -hoE '^func Fuzz[A-Za-z0-9_]*' "$$d"/*_test.go 2>/dev/null | sed "s|^func |./$${d#$(ROOT)/} |"; \
	done); \
	if [ -z "$$targets" ]; then echo "fuzz: no fuzz targets found"; exit 1; fi; \
	failed=""; \
	while read -r pkg name; do \
		echo "== $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) "$$pkg" || failed="$$failed $$pkg:$$name"; \
	done <<< "$$targets"; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed (inputs saved under each package's testdata/fuzz)"; exit 1; fi

.PHONY: synth
synth: $(CDK_OUT) ## synthesize the CDK app into infra/cdk.out (offline)

$(CDK_OUT): $(INFRA_SOURCES) infra/node_modules/.installed $(foreach f,$(FUNCTIONS),.build/lambda/$(f)/bootstrap)
	cd infra && npx --no-install cdk synth --no-notices --quiet --output cdk.out >/dev/null
	@touch $@

.PHONY: functions
functions: $(foreach f,$(FUNCTIONS),.build/lambda/$(f)/bootstrap) ## build every function for AWS (linux/arm64 bootstrap)

.build/lambda/%/bootstrap: $(GO_SOURCES)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $@ ./functions/$*

.PHONY: functions-local
functions-local: $(foreach f,$(FUNCTIONS),.build/local/$(f)/bootstrap) ## build every function for this machine (run under RIE)

.build/local/%/bootstrap: $(GO_SOURCES)
	CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -o $@ ./functions/$*

.PHONY: deps
deps: $(RIE) $(MOTO) infra/node_modules/.installed scripts/bench/powertools/node_modules/.installed ## install what local runs and tests need (RIE, moto venv, CDK CLI, the Powertools benchmark peer)

$(RIE):
	GOBIN=$(ROOT)/.tools/bin $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

$(MOTO):
	python3 -m venv .venv
	.venv/bin/pip install --disable-pip-version-check -q 'moto[server]==$(MOTO_VERSION)'
	@echo $(MOTO_VERSION) > .venv/.moto-$(MOTO_VERSION)

infra/node_modules/.installed: infra/package.json infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

scripts/bench/powertools/node_modules/.installed: scripts/bench/powertools/package.json scripts/bench/powertools/package-lock.json
	cd scripts/bench/powertools && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: clean
clean: ## remove build outputs (keeps the installed tools)
	rm -rf .build infra/cdk.out
