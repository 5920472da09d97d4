# Tributary — the two commands that matter are `make local` and `make test`.
SHELL := /bin/bash
# No "Entering directory" lines from the makes this one runs (the tests'
# `make setaside-show ... > record.json` and `make tail ... | jq` read a
# command's output as the user would, also when a test part is run as
# `make test-e2e`).
MAKEFLAGS += --no-print-directory
.DEFAULT_GOAL := help

GO        ?= go
ROOT      := $(CURDIR)
FUNCTIONS := $(notdir $(wildcard functions/*))
# Example functions of your own (examples/functions/<name>, on package handler)
# are built alongside into .build/<set>/<name>/bootstrap.
EXAMPLE_FUNCTIONS := $(notdir $(wildcard examples/functions/*))
ALL_FUNCTIONS := $(FUNCTIONS) $(EXAMPLE_FUNCTIONS)
FUNCTION_PKGS := $(addprefix ./functions/,$(FUNCTIONS)) $(addprefix ./examples/functions/,$(EXAMPLE_FUNCTIONS))
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE       := .tools/bin/aws-lambda-rie
MOTO      := .venv/bin/moto_server
MOTO_VERSION := 5.2.5
AWSCLI_VERSION := 1.46.3
AWSCLI := .tools/awscli/.installed-$(AWSCLI_VERSION)
# The aws command tests run: a wrapper that starts the venv's python -m awscli
# by a path relative to itself, so it still runs when the checkout (or a
# worktree sharing .tools) moves; pip's bin/aws names the venv's path as
# it was when installed.
AWSCLI_CMD := .tools/awscli/cli/aws
CDK_OUT   := infra/cdk.out/Tributary.template.json
GO_SOURCES := $(shell find functions examples/functions pkg -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum
INFRA_SOURCES := $(shell find infra -name '*.go' -not -name '*_test.go' -not -path 'infra/node_modules/*' -not -path 'infra/cdk.out/*' 2>/dev/null) $(wildcard infra/tributary/*.json) $(wildcard pipelines/*.json) pipelines infra/go.mod infra/go.sum infra/cdk.json
export CDK_DISABLE_CLI_TELEMETRY := true
# jsii prints a banner on Node versions it no longer lists; the app works on them.
# Node's version is asked once, when a recipe first runs (node starting is a
# tenth of a second of CPU, and the tests run make -n many times), and not
# again by a make under this one, which has it in its environment.
ifeq ($(origin JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION),undefined)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION = $(eval JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null))$(JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION)
endif
export TRIBUTARY_ROOT := $(ROOT)
RUNNER    := .build/bin/tributary-local
RUNNER_SOURCES := $(GO_SOURCES) $(shell find cmd/local emulator internal -name '*.go' -not -name '*_test.go' 2>/dev/null)

# `make local` and `make local-up` report where their wall time went: when make
# started, and when each install, build and synth step ran ("<phase> <start ms>
# <end ms>" lines in .build/timings/<start>, read and removed by the runner).
ifneq ($(filter local local-up,$(MAKECMDGOALS)),)
# (set once: make local's sub-makes keep the one they inherit)
ifndef TRIBUTARY_MAKE_STARTED
export TRIBUTARY_MAKE_STARTED := $(shell date +%s%N)
endif
endif
# go's "go: downloading <module>" lines (dozens on a first run) are left out of the output.
NO_DOWNLOAD_LINES = 2> >(grep -v '^go: downloading ' >&2)
# cdk synth's stderr without the lines that only repeat that the CDK app failed
# (go run's "exit status 1", the CLI's "Subprocess exited with error 1"): the
# app's own error (a pipeline file and its field) is the line to read, and
# make still fails. The app runs in infra/, so it names the default pipelines
# directory ../pipelines; from the repository root, where make runs, that is
# pipelines/ (on the first line, and on the line of each further bad file).
SYNTH_LINES = 2> >(grep -v -e '^go: downloading ' -e '^exit status [0-9]*$$' -e 'Subprocess exited with error [0-9]*$$' | sed -u -e 's|^tributary infra: \.\./pipelines/|tributary infra: pipelines/|' -e 's|^\.\./pipelines/|pipelines/|' >&2)
# $(call timed,<phase>) starts a recipe line whose start and end are recorded under <phase>.
# A line that sets scratch=<directory> has it removed when it ends, Ctrl-C included.
timed = scratch=; t0=$$(date +%s%3N); trap 'if [ -n "$$TRIBUTARY_MAKE_STARTED" ]; then mkdir -p $(ROOT)/.build/timings; echo "$(1) $$t0 $$(date +%s%3N)" >> $(ROOT)/.build/timings/$$TRIBUTARY_MAKE_STARTED; fi; if [ -n "$$scratch" ]; then rm -rf "$$scratch"; fi' EXIT;

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

## ---- the two commands -------------------------------------------------------

# make local installs its tools (downloads and unpacking, mostly waiting) while
# the functions compile, four recipes at a time; the synth needs both.
.PHONY: local
local: local-banner ## run the whole topology locally, send sample traffic, print results, exit
	@$(MAKE) --no-print-directory -j4 deps-local deps-browser functions-local $(RUNNER)
	@$(MAKE) --no-print-directory synth-local
	@$(RUNNER) run $(LOCAL_FLAGS)

.PHONY: local-banner
local-banner:
	@echo "Tributary on this machine: build what changed, use the AWS endpoint on $${TRIBUTARY_STANDIN_ADDR:-127.0.0.1:4566} (LocalStack, a make local-up)"
	@echo "or start an AWS stand-in (moto) there if nothing listens, deploy infra/cdk.out onto it and run every function under aws-lambda-rie; $(if $(filter local-up,$(MAKECMDGOALS)),keep it running until Ctrl-C.,send sample traffic, check every result, stop.)"

.PHONY: test
# The parts' Go processes (test binaries, the CDK app under jsii) collect
# garbage at GOGC=400 unless GOGC is set: the parts share 2 cores, and the
# collector's CPU at the default 100 was a fifth of some packages' (pkg/cep,
# pkg/agg, conformance: 67 s of CPU, 53 at 400; the infra tests 117, 101).
# No test reads the heap's size other than after a runtime.GC of its own.
# Its last line counts the Go test packages that passed and failed (go test's
# ok and FAIL lines in the parts' logs), in the plain "N passed, N failed"
# form that CI's summary reads.
test: deps-local deps-bench deps-browser functions-local synth-local test-synths ## run every test (Go packages, end-to-end under RIE against moto, CDK assertions), its parts at once
	@t0=$$(date +%s); rm -f .build/test-*.failed; zygote="$(or $(TMPDIR),/tmp)/tributary-moto-$$$$"; trap 'rm -f "$$zygote".*' EXIT INT TERM; \
	  TRIBUTARY_MOTO_ZYGOTE="$$zygote" GOGC="$${GOGC:-400}" $(TEST_PARTS_MAKE) --no-print-directory -k -j$(words $(TEST_PARTS)) $(TEST_PARTS); s=$$?; \
	  cat .build/test-*.failed 2>/dev/null; \
	  echo "make test: $$(if [ $$s = 0 ]; then echo passed; else echo FAILED; fi) in $$(( $$(date +%s) - t0 )) s (each part's time is on its last line)"; \
	  echo "packages: $(call test_lines,ok  ) passed, $(call test_lines,FAIL) failed"; exit $$s
# $(call test_lines,<go test's word>): how many of go test's package lines
# that start with it ("ok  " or "FAIL", then a tab) the parts' logs hold.
test_lines = $$(cat $(TEST_PARTS:test-%=.build/test-%.log) 2>/dev/null | grep -c -E '^\[[a-z0-9-]+\] $(1)'$$'\t')

# make runs the parts through $(TEST_PARTS_MAKE), not $(MAKE) itself: make
# executes a recipe line that names $(MAKE) even under make -n, and the
# documented-commands test's make -n test, which runs inside make test,
# removed the parts' failure lists (.build/test-*.failed) and overwrote the
# example-app part's log with its dry run. Named through a variable, the
# line is printed by make -n, not run.
TEST_PARTS_MAKE = $(MAKE)
# The tests' stand-ins are forked from one warm moto process, the zygote
# (emulator/standin's ZygoteEnv: each moto started cold spends about 2 s of
# CPU before it has answered each service once, and make test starts some 45).
# Its socket is named for the run (the shell's pid), under the temporary
# directory (a Unix socket's path is at most 107 bytes), and removed when
# the run ends, which ends the zygote.

# make test's parts run at once: most of their time is spent waiting on moto,
# aws-lambda-rie, jsii or cdk synth, not on Go's CPU. Each line a part prints
# starts with its name in brackets, and its last line says whether it passed
# and in how many seconds. Every part runs to its end (make -k) and make test
# fails if any part does. The end-to-end package (functions under
# aws-lambda-rie) is a part of its own so that it starts at once: it is the
# longest, and `go test ./...` would reach it only after the packages before it.
E2E_PKG    := ./emulator/local
TEST_PARTS := test-checks test-go test-e2e test-infra test-example-app
# $(call test_part,<name>,<commands>): run commands (no commas in them), each
# output line prefixed with [name], then say how the part ended. A failing
# part keeps its whole output in .build/test-<name>.log and its failure lines
# (go test's --- FAIL, panics, timeouts, with the lines around them) in
# .build/test-<name>.failed, which make test prints after every part has
# ended: CI often shows only the last lines of a run.
test_part = t0=$$(date +%s); set -o pipefail; mkdir -p .build; \
	{ $(2); } 2>&1 | sed -u 's/^/[$(1)] /' | tee .build/test-$(1).log; s=$$?; \
	rm -f .build/test-$(1).failed; if [ $$s != 0 ]; then { echo "[$(1)] ---- what failed (whole output: .build/test-$(1).log) ----"; \
	  grep -E -B4 -A15 -e '--- FAIL|^\[$(1)\] (panic:|FAIL|fatal error:)|test timed out|DATA RACE' .build/test-$(1).log | grep -v -E '^\[$(1)\] (ok |\?  )' | tail -60; } > .build/test-$(1).failed; fi; \
	echo "[$(1)] $$(if [ $$s = 0 ]; then echo passed; else echo "FAILED (exit $$s)"; fi) in $$(( $$(date +%s) - t0 )) s"; exit $$s

.PHONY: $(TEST_PARTS)
test-checks:
	@$(call test_part,checks,$(GO) mod tidy -diff && (cd infra && $(GO) mod tidy -diff) && \
	  unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './infra/node_modules/*')) && \
	  if [ -n "$$unformatted" ]; then echo "gofmt -l lists files that are not formatted (run gofmt -w on them):"; echo "$$unformatted"; exit 1; fi && \
	  echo "go mod tidy -diff (root and infra) and gofmt -l: clean; go vet ./..." && $(GO) vet ./... && \
	  if [ "$$($(GO) env CGO_ENABLED)" != 1 ]; then \
	    echo "the race detector needs cgo and a C compiler (gcc): none here$$(if [ -n "$$TRIBUTARY_REQUIRE_TOOLS" ]; then echo ", and TRIBUTARY_REQUIRE_TOOLS is set"; else echo "; skipped (install gcc to run it)"; fi)"; \
	    [ -z "$$TRIBUTARY_REQUIRE_TOOLS" ]; \
	  else \
	    echo "the race detector on the aggregate states and the views store and the per-interval flush (it writes the windows of a pane at once)" && \
	    $(GO) test -race -count=1 -o $(TEST_BIN)/race/ ./pkg/agg ./pkg/state && $(GO) test -race -count=1 -o $(TEST_BIN)/race/ -run 'Interval' ./pkg/aggregate; \
	  fi)
# The go part starts its longest packages first (go test runs them in the
# order given, -p at a time), longest first as a make test run measured them
# (pkg/timeline 290 s, pkg/replay 238 s, pkg/aggregate 228 s, cmd/local 167 s
# on 2 shared cores), so that none of them is left running alone at the end; most of their time is spent waiting on moto, hence -p 4 on 2 cores
# (the go part is the longest, and more of its packages at once give it more
# of the CPU the parts share).
# The test binaries are linked without DWARF (-ldflags=-w: stack traces keep
# their names and lines) and the go and e2e parts leave vet to the checks
# part's go vet ./..., which covers the same packages with every analyzer:
# 25 s less CPU on the 2 cores the parts share.
TEST_BUILD_FLAGS := -vet=off -ldflags=-w
# The test binaries are kept (go test -o) under $(TEST_BIN), so that go test
# links a package's binary again only when something it is built from
# changed: without -o it links each one at every run, 1 to 7 s of CPU a
# package (pkg/aggregate 1.9 s, the CDK app's 7.2 s), about 80 s of the CPU
# make test's parts share. go test -o dir/ names a binary after the last
# element of its package's path, so the packages go in groups where those
# differ: go (the libraries), go-tools (cmd/ and bench/, whose names repeat
# pkg/'s), e2e, race, infra and app.
TEST_BIN := .build/testbin
# $(call go_test,<group>,<go test flags and packages>)
go_test = $(GO) test -count=1 $(TEST_BUILD_FLAGS) -o $(TEST_BIN)/$(1)/ $(2)
SLOW_GO_PKGS := ./pkg/timeline ./pkg/replay ./pkg/aggregate ./cmd/local ./emulator/standin ./pkg/projection ./pkg/cdc ./events ./cmd/replay ./bench/cep ./pkg/handler ./pkg/cep ./pkg/tail ./bench/cost
TOOL_DIRS := cmd bench
SLOW_TOOL_PKGS := $(filter $(TOOL_DIRS:%=./%/%),$(SLOW_GO_PKGS))
# $(call go_pkgs,<slow packages>,grep -v|grep): the slow ones, then the rest
# of the module's packages with tests outside (-v) or inside cmd/ and bench/,
# less the end-to-end package (-e none: a pattern for grep when no slow
# packages are given).
go_pkgs = $(1) $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v '/$(E2E_PKG:./%=%)$$' | $(2) $(TOOL_DIRS:%=-e /tributary/%/) | grep -v -x -F -e none $(foreach p,$(1),-e github.com/tributary-dev/tributary/$(p:./%=%)))
# The tools (cmd/ and bench/: 92 s of CPU of the go part's 536, pkg/timeline
# alone 66) run one package at a time beside the libraries' three.
test-go:
	@$(call test_part,go,$(call go_test,go-tools,-p 1 -timeout 15m $(call go_pkgs,$(SLOW_TOOL_PKGS),grep)) & tools=$$!; \
	  $(call go_test,go,-p 3 -timeout 15m $(call go_pkgs,$(filter-out $(SLOW_TOOL_PKGS),$(SLOW_GO_PKGS)),grep -v)); s=$$?; wait $$tools && exit $$s)
# test-build compiles what make test compiles, without running a test: each
# Go test binary (kept under $(TEST_BIN), where make test's go test finds it
# up to date), the race
# detector's builds, the CDK app's test, the example CDK app (examples/app,
# a module of its own), and go vet's findings (cached too);
# and makes what make test's prerequisites make: the functions for this
# machine and the templates the end-to-end tests deploy.
# .ci/run runs it before make test, so that make test's time there is the
# tests', as in a working checkout; on a cold cache it is about two minutes
# of compiling on 2 cores.
.PHONY: test-build
test-build: ## compile and link every test binary (kept under .build/testbin for make test) and make the functions and templates the tests deploy, without running a test (.ci/run does, before make test)
	@echo "▸ go test -c: every package's test binary ($(TEST_BIN)), the race builds, the CDK app's tests, go vet"
	@$(call go_test,go-tools,-c $(call go_pkgs,,grep)) >/dev/null & tools=$$!; $(call go_test,go,-c $(call go_pkgs,,grep -v)) >/dev/null; s=$$?; wait $$tools && exit $$s
	@$(call go_test,e2e,-c $(E2E_PKG))
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ]; then $(GO) test -race -c -o $(TEST_BIN)/race/ ./pkg/agg ./pkg/state ./pkg/aggregate; fi
	@cd infra && $(GO) test -c -ldflags=-w -o ../$(TEST_BIN)/infra/ $(INFRA_TEST_PKGS)
	@cd examples/app && $(GO) vet ./... && $(GO) test -c -o ../../$(TEST_BIN)/app/ ./... && $(GO) build -o /dev/null .
	@$(GO) vet ./...
	@$(MAKE) -s --no-print-directory functions-local synth-local test-synths

# infra's packages with tests (the CDK app's main package has none, and
# cdk synth builds it): go test ./... would print a "[no test files]" line.
INFRA_TEST_PKGS := ./tributary
test-e2e:
	@$(call test_part,e2e,$(call go_test,e2e,-timeout 15m $(E2E_PKG)))
test-infra:
	@$(call test_part,infra,cd infra && $(GO) test -count=1 -ldflags=-w -o ../$(TEST_BIN)/infra/ -timeout 10m $(INFRA_TEST_PKGS))
test-example-app:
	@$(call test_part,example-app,$(MAKE) --no-print-directory example-app)

.PHONY: example-app
example-app: infra/node_modules/.installed functions-local ## check the example CDK app (examples/app): tidy, vet, its tests, and a real cdk synth with cdk-nag
	@echo "▸ examples/app: go mod tidy -diff, go vet, go test, cdk synth (cdk-nag errors fail it)"
	cd examples/app && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -count=1 -o ../../$(TEST_BIN)/app/ -timeout 10m ./...
	cd examples/app && ../../infra/node_modules/.bin/cdk synth --no-notices --quiet --output cdk.out --no-staging \
	  -c tributary:assetDir=../../.build/local >/dev/null $(NO_DOWNLOAD_LINES)

## ---- more ------------------------------------------------------------------

.PHONY: local-up
local-up: local-banner deps-local functions-local synth-local $(RUNNER) ## keep the local topology running until Ctrl-C (exits 0), for exploring: make local-up [LOCAL_FLAGS='-url-port 9100 -lambda-port 3101 -dashboard-port 8190']
	@$(RUNNER) up $(LOCAL_FLAGS)

.PHONY: logs
logs: $(RUNNER) ## print the functions' logs (by execution environment) and the metrics they give, from the running local stand-in: make logs [SINCE=10m (default 1h)] [STACK=Tributary-<time>, as a second make local-up prints it]
	@$(RUNNER) logs -template $(RUNNING_TEMPLATE) $(STACK_ARG) $(call arg,-since,SINCE)

# The operator targets' variables, each target's own. A variable given on
# the command line that the target does not take (a misspelt KYE=, FOLOW=,
# or LIMIT= for make results) stops make before anything runs, naming it
# and listing the ones the target takes: make ignored it, and make tail
# KYE=user-1 printed every record unfiltered. Only command-line variables
# are checked ($(origin) "command line"), and only when every goal is an
# operator target (another goal may take any variable); the environment
# is the user's own.
OPERATOR_VARS_results       := PIPELINE KEY FROM TO FOLLOW STACK
OPERATOR_VARS_tail          := STREAM SHARD KEY TYPE WHERE FROM N FOLLOW JSON RAW STACK
OPERATOR_VARS_setaside      := FUNCTION CATEGORY SINCE N JSON STACK
OPERATOR_VARS_setaside-show := SOURCE SEQUENCE DATA_ONLY STACK
OPERATOR_VARS_putback       := SOURCE SEQUENCE DATA FUNCTION CATEGORY SINCE N DRY_RUN UNCHANGED HORIZON PAST_HORIZON AGAIN ARRIVE_NOW STACK
OPERATOR_VARS_logs          := SINCE STACK
OPERATOR_VARS_invoke        := FN EVENT LAMBDA_PORT LOCAL_FLUSH_SECONDS
# Every one of them also takes the stand-in's address and the go command.
OPERATOR_VARS_ALL           := TRIBUTARY_STANDIN_ADDR GO
OPERATOR_TARGETS := results tail setaside setaside-show putback logs invoke
OPERATOR_GOALS   := $(filter $(OPERATOR_TARGETS),$(MAKECMDGOALS))
# The yes/no variables take 1 or 0 (true/false, yes/no); empty is the
# target's default. Anything else is refused naming the variable: make
# only asked whether one was set, and JSON=0 turned JSON on.
YESNO_VARS := FOLLOW JSON RAW DATA_ONLY DRY_RUN UNCHANGED PAST_HORIZON AGAIN ARRIVE_NOW
YES_WORDS  := 1 true yes
NO_WORDS   := 0 false no
# $(call yes,V) is non-empty when V says yes; $(call no,V) when it says no.
yes = $(if $(word 2,$(value $(1))),,$(filter $(YES_WORDS),$(value $(1))))
no  = $(if $(word 2,$(value $(1))),,$(filter $(NO_WORDS),$(value $(1))))
ifneq ($(OPERATOR_GOALS),)
OPERATOR_KNOWN := $(if $(word 2,$(sort $(OPERATOR_GOALS))),$(sort $(foreach g,$(OPERATOR_GOALS),$(OPERATOR_VARS_$(g)))),$(OPERATOR_VARS_$(OPERATOR_GOALS)))
OPERATOR_NOT_YESNO := $(strip $(foreach v,$(filter $(YESNO_VARS),$(OPERATOR_KNOWN)),$(if $(value $(v)),$(if $(call yes,$(v))$(call no,$(v)),,$(v)))))
ifneq ($(OPERATOR_NOT_YESNO),)
$(error make $(OPERATOR_GOALS): $(firstword $(OPERATOR_NOT_YESNO))=$(value $(firstword $(OPERATOR_NOT_YESNO))) is not yes or no: want 1 or 0 (or true/false, yes/no), or leave it out)
endif
ifeq ($(filter-out $(OPERATOR_TARGETS),$(MAKECMDGOALS)),)
OPERATOR_UNKNOWN := $(filter-out $(OPERATOR_KNOWN) $(OPERATOR_VARS_ALL),$(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v))))
ifneq ($(OPERATOR_UNKNOWN),)
$(error make $(OPERATOR_GOALS) takes no $(OPERATOR_UNKNOWN:%=%=) (misspelt?): it takes $(OPERATOR_KNOWN:%=%=), and TRIBUTARY_STANDIN_ADDR= (see make help))
endif
endif
endif

# Each value reaches the tool as the user typed it, whatever its bytes
# (quotes, spaces, $, backticks): through the environment, as
# TRIBUTARY_ARG_<VAR> set to the variable's unexpanded value, and "$$…"
# in the recipe; never written into the recipe's shell text, where
# KEY=it's ended the shell with "unexpected EOF while looking for matching".
$(foreach t,$(OPERATOR_TARGETS),$(foreach v,$(filter-out $(YESNO_VARS),$(OPERATOR_VARS_$(t))),$(eval $(t): export TRIBUTARY_ARG_$(v) := $$(value $(v)))))
# (Make would also export them under their own names, expanded: a $(shell …)
# in a value would run.)
ifneq ($(OPERATOR_GOALS),)
unexport $(filter-out $(OPERATOR_VARS_ALL) LOCAL_FLUSH_SECONDS,$(OPERATOR_KNOWN))
endif
# $(call arg,-flag,VAR): -flag "$TRIBUTARY_ARG_VAR" when VAR is given.
arg = $(if $(value $(2)),$(1) "$$TRIBUTARY_ARG_$(2)")
# The stack the operator targets read, Tributary unless STACK= names another.
STACK_ARG = -stack "$${TRIBUTARY_ARG_STACK:-Tributary}"

# make invoke's FN= and EVENT= are checked before its prerequisites build
# (minutes on a fresh machine); the runner checks the event itself.
ifneq ($(filter invoke,$(MAKECMDGOALS)),)
ifeq ($(and $(strip $(value FN)),$(strip $(value EVENT))),)
$(error make invoke needs FN= and EVENT=, for example: make invoke FN=ingest EVENT=events/ingest/function-url-post.json)
endif
ifeq ($(wildcard $(value EVENT)),)
$(error make invoke: EVENT=$(value EVENT): no such file (a path from $(CURDIR), for example events/ingest/function-url-post.json))
endif
endif

# Then it checks FN= (and the event) with the runner before it installs,
# builds or synthesizes anything (minutes on a fresh machine, a synth after
# any change to a pipeline file), against the last synthesized template,
# when that template is the one the synth would write again: written by
# make's synth (not newer than its stamp, as after a cdk synth by hand with
# other settings) and newer than everything the synth reads. After a change
# to any of that (a pipeline file added adds a function) the synth comes
# first, for correctness, and the runner checks FN against what it wrote
# before it brings anything up. (A running make local-up is left to answer
# for its own functions.)
ifneq ($(filter invoke,$(MAKECMDGOALS)),)
INVOKE_TEMPLATE_CURRENT := $(if $(wildcard $(CDK_OUT)),$(shell \
  for s in .build/synth.local .build/synth.lambda; do [ -e $$s ] && [ ! $(CDK_OUT) -nt $$s ] && current=1; done; \
  [ -n "$$current" ] && [ -z "$$(find $(INFRA_SOURCES) -newer $(CDK_OUT) -print -quit 2>/dev/null)" ] && echo yes))
endif
.PHONY: invoke-check
invoke-check: $(RUNNER)
	@$(RUNNER) invoke -check -fn "$$TRIBUTARY_ARG_FN" -event "$$TRIBUTARY_ARG_EVENT" $(call arg,-lambda-port,LAMBDA_PORT)
ifneq ($(INVOKE_TEMPLATE_CURRENT),)
# Under -j too: nothing slow starts before the check.
$(RIE) $(MOTO) infra/node_modules/.installed .build/local/.built .build/synth.local: | invoke-check
endif

.PHONY: invoke
invoke: $(if $(INVOKE_TEMPLATE_CURRENT),invoke-check) deps-local functions-local synth-local $(RUNNER) ## send one event to a function as the console's Test tab does: make invoke FN=ingest EVENT=events/ingest/function-url-post.json
	@$(RUNNER) invoke -fn "$$TRIBUTARY_ARG_FN" -event "$$TRIBUTARY_ARG_EVENT" $(call arg,-lambda-port,LAMBDA_PORT)

$(RUNNER): $(RUNNER_SOURCES)
	@$(call timed,builds) echo "▸ go build ./cmd/local → $@" && $(GO) build -o $@ ./cmd/local $(NO_DOWNLOAD_LINES)

# The stand-in's address for the commands that read a running make local-up
# (results, tail, setaside, setaside-show, putback), read and checked here
# once: a malformed one (TRIBUTARY_STANDIN_ADDR=bogus) is named as such,
# before the tool reports that nothing answers at http://bogus. (The local
# runner, under make local, local-up, invoke and logs, checks it itself.)
# The value is taken as text, never expanded by make: a variable given on
# the command line or in the environment is expanded where it is used (and
# when make exports it to a recipe), so TRIBUTARY_STANDIN_ADDR='$(shell
# touch x)127.0.0.1:4566' ran its command under every target; and only a
# host name's and a port's characters are taken, since the address is
# written into the commands' recipes (a backquote in it ran under make
# setaside).
ifneq ($(origin TRIBUTARY_STANDIN_ADDR),undefined)
override TRIBUTARY_STANDIN_ADDR := $(value TRIBUTARY_STANDIN_ADDR)
endif
STANDIN_ADDR := $(or $(TRIBUTARY_STANDIN_ADDR),127.0.0.1:4566)
# $(call digits,x) is x when x is a run of decimal digits, else empty.
digits = $(if $(strip $(1)),$(if $(strip $(subst 9,,$(subst 8,,$(subst 7,,$(subst 6,,$(subst 5,,$(subst 4,,$(subst 3,,$(subst 2,,$(subst 1,,$(subst 0,,$(1)))))))))))),,$(1)))
# $(call without,text,chars): text less every one of chars (a list).
without = $(if $(2),$(call without,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
HOST_CHARS := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S T U V W X Y Z 0 1 2 3 4 5 6 7 8 9 . - :
ifneq ($(filter results tail setaside setaside-show putback,$(MAKECMDGOALS)),)
STANDIN_PORT := $(call digits,$(lastword $(subst :, ,$(STANDIN_ADDR))))
ifneq ($(words $(STANDIN_ADDR)) $(words $(subst :, ,$(STANDIN_ADDR))) $(if $(STANDIN_PORT),port) $(if $(call without,$(STANDIN_ADDR),$(HOST_CHARS)),other),1 2 port )
$(error TRIBUTARY_STANDIN_ADDR='$(TRIBUTARY_STANDIN_ADDR)': not host:port; want the running make local-up's stand-in, such as 127.0.0.1:4566 (unset: 127.0.0.1:4566; its banner names another))
endif
ifneq ($(shell [ "$$(expr $(STANDIN_PORT) + 0 2>/dev/null)" -ge 1 ] 2>/dev/null && [ "$$(expr $(STANDIN_PORT) + 0 2>/dev/null)" -le 65535 ] 2>/dev/null && echo ok),ok)
$(error TRIBUTARY_STANDIN_ADDR=$(TRIBUTARY_STANDIN_ADDR): port $(STANDIN_PORT) is not 1 to 65535; want the running make local-up's stand-in, such as 127.0.0.1:4566)
endif
endif

# The template the running make local-up deployed: the runner keeps a copy
# under .build/up/<host>-<port>/<stack>.template.json while it runs (the
# file is gone when it stops). results, tail, setaside, setaside-show,
# putback and logs read that copy while it is there, else infra/cdk.out: a synth
# while local-up runs (make invoke, a changed pipeline file) rewrites
# infra/cdk.out, and they then named resources and aggregates the running
# stack was not deployed with.
# (Its path is one the runner wrote, or infra/cdk.out's: safe in a recipe.)
RUNNING_TEMPLATE_COPY = .build/up/$(subst :,-,$(subst localhost:,127.0.0.1:,$(STANDIN_ADDR)))/$(or $(value STACK),Tributary).template.json
RUNNING_TEMPLATE = $(or $(firstword $(wildcard $(RUNNING_TEMPLATE_COPY))),$(CDK_OUT))

# Built, not `go run`: go run turns the tool's exit status (0 on Ctrl-C of
# -follow, 2 for a usage error) into 1.
.build/bin/results: $(GO_SOURCES) $(wildcard cmd/results/*.go internal/*/*.go emulator/*/*.go)
	@$(GO) build -o $@ ./cmd/results

.PHONY: results
results: .build/bin/results ## a key's windows from the running make local-up: make results [PIPELINE=pageviews] KEY=user-1 [FROM=2h] [TO=now] [FOLLOW=1]
	@AWS_ENDPOINT_URL=http://$(STANDIN_ADDR) AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_PROFILE= \
	  TRIBUTARY_MAKE_VARS='pipeline:PIPELINE= key:KEY= from:FROM= to:TO= follow:FOLLOW=1 stack:STACK=' \
	  .build/bin/results -template $(RUNNING_TEMPLATE) $(STACK_ARG) \
	  $(call arg,-pipeline,PIPELINE) $(call arg,-key,KEY) $(call arg,-from,FROM) $(call arg,-to,TO) $(if $(call yes,FOLLOW),-follow)

# Built, not `go run`, for the same reason as results (its exit status).
.build/bin/tail: $(GO_SOURCES) $(wildcard cmd/tail/*.go internal/*/*.go emulator/*/*.go)
	@$(GO) build -o $@ ./cmd/tail

.PHONY: tail
tail: .build/bin/tail ## follow a stream of the running make local-up (Ctrl-C stops): make tail STREAM=events|results|joins|matches|enriched|show-events [KEY=user-1] [TYPE=page_view] [WHERE=data.page=/] [FROM=10m|<sequence number> SHARD=<shard id>] [N=100, with FOLLOW=0] [FOLLOW=0] [JSON=1|RAW=1]
	@AWS_ENDPOINT_URL=http://$(STANDIN_ADDR) AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_PROFILE= \
	  TRIBUTARY_MAKE_VARS='stream:STREAM= shard:SHARD= key:KEY= type:TYPE= where:WHERE= from:FROM= n:N= f:FOLLOW json:JSON=1 raw:RAW=1 stack:STACK=' \
	  .build/bin/tail -template $(RUNNING_TEMPLATE) $(STACK_ARG) -stream "$$TRIBUTARY_ARG_STREAM" \
	  $(call arg,-shard,SHARD) $(call arg,-key,KEY) $(call arg,-type,TYPE) $(call arg,-where,WHERE) $(call arg,-from,FROM) $(call arg,-n,N) \
	  $(if $(call no,FOLLOW),,-f) $(if $(call yes,JSON),-json) $(if $(call yes,RAW),-raw)

# Built, not `go run`, for the same reason as results (its exit status).
.build/bin/setaside: $(GO_SOURCES) $(wildcard cmd/setaside/*.go internal/*/*.go emulator/*/*.go)
	@$(GO) build -o $@ ./cmd/setaside

SETASIDE_ENV = AWS_ENDPOINT_URL=http://$(STANDIN_ADDR) AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_PROFILE= \
  TRIBUTARY_MAKE_VARS='function:FUNCTION= category:CATEGORY= since:SINCE= n:N= json:JSON=1 source:SOURCE= sequence:SEQUENCE= data-only:DATA_ONLY=1 data:DATA= dry-run:DRY_RUN=1 unchanged:UNCHANGED=1 horizon:HORIZON= past-horizon:PAST_HORIZON=1 again:AGAIN=1 arrive-now:ARRIVE_NOW=1 stack:STACK='
SETASIDE_LOCAL = -template $(RUNNING_TEMPLATE) $(STACK_ARG)

.PHONY: setaside
setaside: .build/bin/setaside ## the records the running make local-up set aside, newest first: make setaside [FUNCTION=name] [CATEGORY=invalid] [SINCE=1h] [N=20] [JSON=1]
	@$(SETASIDE_ENV) .build/bin/setaside list $(SETASIDE_LOCAL) \
	  $(call arg,-function,FUNCTION) $(call arg,-category,CATEGORY) $(call arg,-since,SINCE) $(call arg,-n,N) $(if $(call yes,JSON),-json)

.PHONY: setaside-show
setaside-show: .build/bin/setaside ## one set-aside record with its data: make setaside-show SOURCE=... SEQUENCE=... [DATA_ONLY=1] (make setaside prints both)
	@$(SETASIDE_ENV) .build/bin/setaside show $(SETASIDE_LOCAL) -source "$$TRIBUTARY_ARG_SOURCE" -sequence "$$TRIBUTARY_ARG_SEQUENCE" $(if $(call yes,DATA_ONLY),-data-only)

.PHONY: putback
putback: .build/bin/setaside ## put a set-aside record back on its stream: make putback SOURCE=... SEQUENCE=... [DATA=record.json] [DRY_RUN=1], or FUNCTION=/CATEGORY=/SINCE= for several [UNCHANGED=1] [HORIZON=1h] [PAST_HORIZON=1] [AGAIN=1] [ARRIVE_NOW=1]
	@$(SETASIDE_ENV) .build/bin/setaside putback $(SETASIDE_LOCAL) \
	  $(call arg,-source,SOURCE) $(call arg,-sequence,SEQUENCE) $(call arg,-data,DATA) \
	  $(call arg,-function,FUNCTION) $(call arg,-category,CATEGORY) $(call arg,-since,SINCE) $(call arg,-n,N) \
	  $(if $(call yes,DRY_RUN),-dry-run) $(if $(call yes,UNCHANGED),-unchanged) $(call arg,-horizon,HORIZON) $(if $(call yes,PAST_HORIZON),-past-horizon) \
	  $(if $(call yes,AGAIN),-again) $(if $(call yes,ARRIVE_NOW),-arrive-now)

.PHONY: localstack-check
localstack-check: deps-local ## run against a real LocalStack without Docker: install it (PyPI localstack-core, pinned, host mode) and cdklocal, start it on a free port, make local on it, cdklocal bootstrap + deploy + destroy, stop it; prints each step's time
	@scripts/localstack-check.sh

.PHONY: schema
schema: ## regenerate pipelines/pipeline.schema.json (the pipeline files' JSON Schema) from pkg/pipeline; a test fails when it is stale
	$(GO) run ./cmd/pipelineschema -o pipelines/pipeline.schema.json

.PHONY: bench
bench: deps-local deps-bench ## cost, the deployed pipeline's monthly bill at a stated load (and at 1,000 events/s over 100 keys, busy keys whose sessions never close) and one instance's keep-up, throughput, binaries, worker idempotency, ingest and enrichment, CEP and the stream join against their peers, side by side, and event-sourced commands (BENCH lines, about 10 min)
	$(GO) run ./bench/cost -events 1000 -batches 100,1000
	$(GO) run ./bench/load -loads 10x100,100x1000
	$(GO) run ./bench/load -loads 1000x100 -paths per-interval -keepup=false -powertools=false -flushes "" -nolog=false
	$(GO) run ./bench/throughput
	$(GO) run ./bench/binary
	$(GO) run ./bench/worker
	$(GO) run ./bench/ingest
	$(GO) run ./bench/enrich
	$(GO) run ./bench/cep
	$(GO) run ./bench/es

.PHONY: bench-full
bench-full: deps-local deps-bench ## the whole cost matrix: 1,000 and 10,000 events x batch 100 and 1,000 (about 12 min on moto)
	$(GO) run ./bench/cost
	$(GO) run ./bench/load
	$(GO) run ./bench/throughput
	$(GO) run ./bench/binary
	$(GO) run ./bench/worker
	$(GO) run ./bench/ingest
	$(GO) run ./bench/enrich
	$(GO) run ./bench/cep
	$(GO) run ./bench/es

.PHONY: soak
soak: deps-local ## every fault-injection harness with many seeds: aggregate (1,500 per write path, every window kind), two warm handlers and the ticker racing on sessions and sliding windows (400), join (1,000 per kind), CEP (2,000, and 60 bursts), dedupe (2,000), event sourcing (2,000) on memdb, the first 2 of each also on moto; then 200 Kafka Streams conformance histories per window kind, late policy and write path, and the session ones again with every run held as its aggregate, and 200 Flink CEP histories per rule form. Prints a SOAK line per harness and each failing seed's command (scripts/soak.sh; SOAK_<HARNESS>=n to change a count)
	GO=$(GO) scripts/soak.sh

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
synth: .build/synth.lambda ## synthesize the CDK app into infra/cdk.out with the linux/arm64 bootstraps as assets (for deploying)

# The local runner reads the template's resources, never its function assets, so
# the local targets synthesize with the bootstraps built for this machine as
# assets, referenced in place (not copied into cdk.out): no linux/arm64 build on
# the way to make local (minutes on a cold machine), and no new synth when only
# function code changed. The two write the same infra/cdk.out, which differs
# only in asset metadata; `cdk deploy` synthesizes again with the arm64 ones.
.PHONY: synth-local
synth-local: .build/synth.local ## synthesize infra/cdk.out for the local runner (assets: .build/local)

# Both depend on the template itself: a `cdk synth` run by hand (docs/configuration.md's
# settings) rewrites it, and the next make synthesizes its own again rather than deploy
# that one locally, or ship a local one.
.build/synth.lambda: $(INFRA_SOURCES) infra/node_modules/.installed .build/lambda/.built $(wildcard $(CDK_OUT))
	@$(call timed,synth) echo "▸ cdk synth → infra/cdk.out (assets: .build/lambda, linux/arm64)" && \
	rm -rf infra/cdk.out/asset.* .build/synth.local && (cd infra && npx --no-install cdk synth --no-notices --quiet --output cdk.out >/dev/null $(SYNTH_LINES)) && \
	touch $(CDK_OUT) $@

# Local runs write aggregates once per batch, so results show seconds after the
# watermark passes; the deployed default (infra/cdk.json) writes once every two
# minutes, which cuts the DynamoDB bill by about three quarters against per batch (docs/cost.md).
# LOCAL_FLUSH_SECONDS=120 LOCAL_FLAGS=-timeout=15m runs the deployed path
# locally. The stamp .build/local-flush.<n> makes a change of it synthesize again.
LOCAL_FLUSH_SECONDS ?= 0
# Checked here, naming the variable, before anything builds: cdk synth would
# refuse it naming only the context key it is passed as (tributary:flushIntervalSeconds).
LOCAL_FLUSH_WANT := want whole seconds from 0 (aggregates write once per batch, the local default) to 900 (Lambda's tumbling window limit), for example LOCAL_FLUSH_SECONDS=120
ifneq ($(words $(LOCAL_FLUSH_SECONDS))$(strip $(subst 9,,$(subst 8,,$(subst 7,,$(subst 6,,$(subst 5,,$(subst 4,,$(subst 3,,$(subst 2,,$(subst 1,,$(subst 0,,$(LOCAL_FLUSH_SECONDS)))))))))))),1)
$(error LOCAL_FLUSH_SECONDS='$(LOCAL_FLUSH_SECONDS)': $(LOCAL_FLUSH_WANT))
endif
ifneq ($(filter 0%,$(LOCAL_FLUSH_SECONDS)),$(filter 0,$(LOCAL_FLUSH_SECONDS)))
$(error LOCAL_FLUSH_SECONDS=$(LOCAL_FLUSH_SECONDS): a leading 0; $(LOCAL_FLUSH_WANT))
endif
ifneq ($(shell [ "$$(expr $(LOCAL_FLUSH_SECONDS) + 0 2>/dev/null)" -le 900 ] 2>/dev/null && echo ok),ok)
$(error LOCAL_FLUSH_SECONDS=$(LOCAL_FLUSH_SECONDS): more than 900 seconds; $(LOCAL_FLUSH_WANT))
endif
.build/local-flush.$(LOCAL_FLUSH_SECONDS):
	@mkdir -p .build && rm -f .build/local-flush.* && touch $@

.build/synth.local: $(INFRA_SOURCES) infra/node_modules/.installed .build/local-flush.$(LOCAL_FLUSH_SECONDS) $(wildcard $(CDK_OUT)) | .build/local/.built
	@$(call timed,synth) echo "▸ cdk synth → infra/cdk.out (assets: .build/local; the runner reads the template, not the assets; flush interval $(LOCAL_FLUSH_SECONDS) s)" && \
	rm -rf infra/cdk.out/asset.* .build/synth.lambda && (cd infra && npx --no-install cdk synth --no-notices --quiet --output cdk.out \
	  --no-staging -c tributary:assetDir=../.build/local -c tributary:flushIntervalSeconds=$(LOCAL_FLUSH_SECONDS) >/dev/null $(SYNTH_LINES)) && \
	touch $(CDK_OUT) $@

# The end-to-end tests' two other templates (emulator/local), made as make
# synth-local makes its own and remade only when what they are made from
# changes: a cdk synth is about 35 s of CPU (jsii), and make test's parts share
# 2 cores. test-build makes them, as it compiles the tests.
#  - synth-hmac: the stack with -c tributary:ingestAuth=HMAC (TestSignedIngestEndToEnd);
#  - synth-readme: the repository's pipelines and the README's "Your first
#    pipeline" file, as a user adds it to pipelines/ (TestReadmeFirstPipeline,
#    which checks that the file made here is the README's block), written
#    once per batch as make local-up's are.
# A synth that fails (cdk-nag's errors fail it after the template is
# written) leaves no template, so the next make runs it again.
TEST_SYNTHS := .build/synth-hmac/Tributary.template.json .build/synth-readme/Tributary.template.json
# $(call test_synth,<output dir>,<cdk synth's other flags>)
test_synth = (cd infra && npx --no-install cdk synth --no-notices --quiet --no-staging --output ../$(1) \
	  -c tributary:assetDir=../.build/local $(2) >/dev/null $(SYNTH_LINES)) || { rm -rf $(1); exit 1; }
.PHONY: test-synths
test-synths: $(TEST_SYNTHS) ## synthesize the end-to-end tests' two other templates (the signed ingest, the README's first pipeline)
.build/synth-hmac/Tributary.template.json: $(INFRA_SOURCES) infra/node_modules/.installed | .build/local/.built
	@$(call timed,synth-hmac) echo "▸ cdk synth -c tributary:ingestAuth=HMAC → .build/synth-hmac (for the end-to-end tests)" && \
	rm -rf .build/synth-hmac && $(call test_synth,.build/synth-hmac,-c tributary:ingestAuth=HMAC)
README_PIPELINE_MARKER := <!-- tested by emulator/local TestReadmeFirstPipeline: it synthesizes
.build/synth-readme/Tributary.template.json: $(INFRA_SOURCES) README.md infra/node_modules/.installed | .build/local/.built
	@$(call timed,synth-readme) echo "▸ cdk synth with the README's first pipeline added → .build/synth-readme (for the end-to-end tests)" && \
	rm -rf .build/synth-readme .build/readme-pipelines && mkdir -p .build/readme-pipelines && cp pipelines/*.json .build/readme-pipelines/ && \
	awk -v m='$(README_PIPELINE_MARKER)' 'f == 0 && index($$0, m) == 1 { f = 1; next } f == 1 && $$0 == "```json" { f = 2; next } f == 2 && $$0 == "```" { exit } f == 2' README.md > .build/readme-pipelines/.readme && \
	name=$$(jq -er .name .build/readme-pipelines/.readme) && mv .build/readme-pipelines/.readme ".build/readme-pipelines/$$name.json" && \
	$(call test_synth,.build/synth-readme,-c tributary:flushIntervalSeconds=0 -c tributary:pipelinesDir=$(CURDIR)/.build/readme-pipelines)

# Each set of functions is built by one go build (its packages in parallel) into a
# directory of its own (two makes at once cannot trip on each other), then moved
# to .build/<set>/<name>/bootstrap.
.PHONY: functions
functions: .build/lambda/.built ## build every function for AWS (linux/arm64 bootstrap)

.build/lambda/.built: $(GO_SOURCES)
	@$(call timed,builds) echo "▸ go build: $(words $(ALL_FUNCTIONS)) functions for AWS (linux/arm64) → .build/lambda/<name>/bootstrap" && \
	mkdir -p .build && out=$$(mktemp -d .build/lambda-XXXXXX) && scratch=$$out && \
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $$out/ $(FUNCTION_PKGS) $(NO_DOWNLOAD_LINES) && \
	for f in $(ALL_FUNCTIONS); do mkdir -p .build/lambda/$$f && mv -f $$out/$$f .build/lambda/$$f/bootstrap; done && rm -rf $$out && touch $@

.PHONY: functions-local
functions-local: .build/local/.built ## build every function for this machine (run under RIE)

# While the functions build, the CDK app's packages compile beside them (into
# Go's build cache, no binary), so that the synth after them only links: on a
# cold build cache the two took 2m15s and 2m7s one after the other.
.build/local/.built: $(GO_SOURCES)
	@$(call timed,builds) echo "▸ go build: $(words $(ALL_FUNCTIONS)) functions for this machine → .build/local/<name>/bootstrap (and the CDK app's packages beside them)" && \
	mkdir -p .build && out=$$(mktemp -d .build/local-XXXXXX) && scratch=$$out && \
	{ (cd infra && $(GO) build ./tributary/ >/dev/null 2>&1) & cdkapp=$$!; \
	  CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -o $$out/ $(FUNCTION_PKGS) $(NO_DOWNLOAD_LINES); s=$$?; wait $$cdkapp; test $$s = 0; } && \
	for f in $(ALL_FUNCTIONS); do mkdir -p .build/local/$$f && mv -f $$out/$$f .build/local/$$f/bootstrap; done && rm -rf $$out && touch $@

.PHONY: deps
deps: deps-local deps-bench deps-browser ## install everything the targets below use (deps-local, deps-bench, deps-browser)

.PHONY: deps-local
deps-local: $(RIE) $(MOTO) infra/node_modules/.installed ## install what make local needs: aws-lambda-rie, the moto venv, the CDK CLI

# Debian's chromium, for the dashboard's browser test and make local's screenshot;
# installed with apt-get when missing and this user may (root, or sudo without a
# password). When it cannot be, make local takes no screenshot and the browser
# test skips, each saying why.
.PHONY: deps-browser
deps-browser: ## install chromium (apt-get install -y chromium) when /usr/bin/chromium is missing
	@if [ -z "$$TRIBUTARY_CHROMIUM" ] && [ ! -x /usr/bin/chromium ]; then $(call timed,installs) mkdir -p .build; \
	  if [ "$$(id -u)" = 0 ]; then apt=apt-get; elif sudo -n true 2>/dev/null; then apt="sudo -n apt-get"; else apt=; fi; \
	  if [ -z "$$apt" ]; then echo "▸ chromium is missing and this user cannot install it (apt-get install -y chromium as root): no dashboard screenshot, the browser test skips"; exit 0; fi; \
	  echo "▸ installing chromium (apt-get install -y chromium)"; \
	  { $$apt install -y -q chromium || { $$apt update -q && $$apt install -y -q chromium; }; } > .build/apt-chromium.log 2>&1 || \
	    echo "▸ could not install chromium (.build/apt-chromium.log says why): no dashboard screenshot, the browser test skips"; \
	fi

.PHONY: deps-bench
deps-bench: scripts/bench/powertools/node_modules/.installed $(AWSCLI_CMD) ## install the benchmarks' Powertools peer (make bench, and bench/cost's test in make test) and the AWS CLI the docs' commands test runs

# The AWS CLI (v1, from PyPI) in a venv of its own, so that its botocore pin
# does not move moto's: docs/local.md's aws lambda invoke is run as written
# by a test (emulator/local), with .tools/awscli/cli on its PATH.
$(AWSCLI):
	@$(call timed,installs) echo "▸ installing the AWS CLI $(AWSCLI_VERSION) into .tools/awscli (pip)" && \
	python3 -m venv .tools/awscli && .tools/awscli/bin/pip install --disable-pip-version-check -q 'awscli==$(AWSCLI_VERSION)' && touch $@

$(AWSCLI_CMD): $(AWSCLI)
	@mkdir -p $(@D) && printf '#!/bin/sh\nexec "$$(dirname "$$0")/../bin/python3" -m awscli "$$@"\n' > $@ && chmod +x $@

$(RIE):
	@$(call timed,installs) echo "▸ installing aws-lambda-rie into .tools/bin (go install)" && \
	GOBIN=$(ROOT)/.tools/bin $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION) $(NO_DOWNLOAD_LINES)

$(MOTO):
	@$(call timed,installs) echo "▸ installing moto $(MOTO_VERSION) into .venv (pip)" && \
	python3 -m venv .venv && .venv/bin/pip install --disable-pip-version-check -q 'moto[server]==$(MOTO_VERSION)' && \
	echo $(MOTO_VERSION) > .venv/.moto-$(MOTO_VERSION)

# npm's output goes to a log, shown only when it fails.
# An npm install's stamp holds the hash of the package files it installed:
# a checkout that only touched them (a fresh clone, a branch switch and
# back) re-stamps instead of running npm ci again, which would empty
# node_modules first (through a symlink too) and take a minute.
# $(call npm_install,<dir>,<what>,<log name>)
npm_install = want=$$(cat $(1)/package.json $(1)/package-lock.json | sha256sum | cut -d' ' -f1); \
	if [ -d $(1)/node_modules/.bin ] && [ "$$(cat $@ 2>/dev/null)" = "$$want" ]; then touch $@; exit 0; fi; \
	$(call timed,installs) echo "▸ installing $(2) into $(1)/node_modules (npm ci)" && mkdir -p .build && \
	(cd $(1) && npm ci --no-audit --no-fund --loglevel=error) > .build/$(3).log 2>&1 || { cat .build/$(3).log; exit 1; }; \
	echo "$$want" > $@

infra/node_modules/.installed: infra/package.json infra/package-lock.json
	@$(call npm_install,infra,the CDK CLI,npm-infra)

scripts/bench/powertools/node_modules/.installed: scripts/bench/powertools/package.json scripts/bench/powertools/package-lock.json
	@$(call npm_install,scripts/bench/powertools,the benchmarks' Powertools peer,npm-powertools)

.PHONY: clean
clean: ## remove build outputs (keeps the installed tools)
	rm -rf .build infra/cdk.out
