#!/usr/bin/env bash
# make localstack-check: run the project against a real LocalStack, as a user
# with Docker would, on a machine without Docker. It installs LocalStack
# (PyPI localstack-core, pinned by localstack/requirements-host.txt, in its
# own virtual environment .tools/localstack, run in host mode) and cdklocal
# (npm aws-cdk-local, pinned, in .tools/cdklocal), starts LocalStack on a
# free port of 127.0.0.1, runs `make local` against it, then `cdklocal
# bootstrap`, `deploy` and `destroy` of the CDK app, and stops LocalStack
# however the check ends. Each step's time is printed, and its output kept
# in .build/localstack-check/<step>.log.
set -euo pipefail

LOCALSTACK_VERSION=2026.3.0
CDKLOCAL_VERSION=3.0.4

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VENV=.tools/localstack
CDKLOCAL_DIR=.tools/cdklocal
# LocalStack's files in host mode: the packages it installs on first use
# (kinesis-mock from npm) are kept between runs under lib; its state is not.
LS_ROOT=$ROOT/.tools/localstack-fs
OUT=.build/localstack-check
mkdir -p "$OUT"

declare -a TIMES=()
began=$(date +%s)

summary() {
	echo "▸ localstack-check step times:"
	for t in "${TIMES[@]}"; do echo "    $t"; done
	echo "    total: $(($(date +%s) - began)) s"
}

# step <name> <log> <command...>: run the command (in a pipe: not one that
# must change this shell), its output to the terminal and to $OUT/<log>.log;
# record its time; stop the check if it fails.
step() {
	local name=$1 log=$OUT/$2.log t0 s
	shift 2
	echo "▸ $name"
	t0=$(date +%s)
	set +e
	"$@" 2>&1 | tee "$log"
	s=${PIPESTATUS[0]}
	set -e
	record "$name" "$t0" "$s" "$log"
}

# quiet_step is step with the output only in the log (its end shown when it
# fails), run in this shell.
quiet_step() {
	local name=$1 log=$OUT/$2.log t0 s=0
	shift 2
	echo "▸ $name"
	t0=$(date +%s)
	"$@" > "$log" 2>&1 || s=$?
	[ $s = 0 ] || tail -n 40 "$log"
	record "$name" "$t0" "$s" "$log"
}

record() {
	TIMES+=("$1: $(($(date +%s) - $2)) s$([ "$3" = 0 ] || echo " (FAILED, exit $3)")")
	if [ "$3" != 0 ]; then
		echo "✗ $1 failed (exit $3); its output: $4"
		exit "$3"
	fi
	echo "  ⏱ $1: $(($(date +%s) - $2)) s"
}

# python_for_localstack names a Python 3.12 or newer: localstack-core
# 2026.3.0 uses 3.12 syntax, though its metadata says 3.10.
python_for_localstack() {
	local p candidates=(python3.13 python3.12 python3)
	# pyenv's shims answer only for the versions it is set to: ask for
	# its installed ones by path.
	if command -v pyenv > /dev/null; then
		candidates+=($(ls -d "$(pyenv root)"/versions/3.1[2-9]*/bin/python3 2> /dev/null | sort -rV))
	fi
	for p in "${candidates[@]}"; do
		if "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' > /dev/null 2>&1; then
			command -v "$p"
			return
		fi
	done
	echo "localstack-check: LocalStack $LOCALSTACK_VERSION needs Python 3.12 or newer (python3.13, python3.12 or python3 on PATH, or a pyenv version); none found" >&2
	return 1
}

# The install functions run where set -e does not act (quiet_step's ||):
# each command is chained.
install_localstack() {
	local py
	py=$(python_for_localstack) &&
		rm -rf "$VENV" &&
		"$py" -m venv "$VENV" &&
		"$VENV/bin/pip" install --disable-pip-version-check -q -c localstack/requirements-host.txt \
			"localstack-core[runtime]==$LOCALSTACK_VERSION" service-identity &&
		echo "$marker" > "$VENV/.installed"
}

install_cdklocal() {
	# Its own prefix: npm install in infra/ would prune infra/node_modules.
	rm -rf "$CDKLOCAL_DIR" &&
		mkdir -p "$CDKLOCAL_DIR" &&
		npm install --prefix "$CDKLOCAL_DIR" --no-audit --no-fund --loglevel=error "aws-cdk-local@$CDKLOCAL_VERSION" &&
		echo "$CDKLOCAL_VERSION" > "$CDKLOCAL_DIR/.installed"
}

# The installs are redone only when a pin changed.
marker="$LOCALSTACK_VERSION $(sha256sum localstack/requirements-host.txt | cut -c1-16)"
if [ "$(cat "$VENV/.installed" 2> /dev/null)" != "$marker" ]; then
	quiet_step "install LocalStack $LOCALSTACK_VERSION (pip, .tools/localstack)" install-localstack install_localstack
fi
if [ "$(cat "$CDKLOCAL_DIR/.installed" 2> /dev/null)" != "$CDKLOCAL_VERSION" ]; then
	quiet_step "install cdklocal $CDKLOCAL_VERSION (npm, .tools/cdklocal)" install-cdklocal install_cdklocal
fi

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ENDPOINT=http://127.0.0.1:$PORT
LS_PID=
stop_localstack() {
	local s=$?
	if [ -n "$LS_PID" ] && kill -0 "$LS_PID" 2> /dev/null; then
		local t0
		t0=$(date +%s)
		echo "▸ stop LocalStack (pid $LS_PID)"
		kill -TERM -- "-$LS_PID" 2> /dev/null || true
		for _ in $(seq 60); do
			kill -0 "$LS_PID" 2> /dev/null || break
			sleep 0.5
		done
		kill -KILL -- "-$LS_PID" 2> /dev/null || true
		TIMES+=("stop LocalStack: $(($(date +%s) - t0)) s")
	fi
	summary
	echo "localstack-check: $([ $s = 0 ] && echo passed || echo "FAILED (exit $s)") in $(($(date +%s) - began)) s"
	exit $s
}
trap stop_localstack EXIT
trap 'exit 130' INT TERM

start_localstack() {
	rm -rf "$LS_ROOT/tmp" || return
	# Its own process group (setsid), so that stopping it ends what it
	# started (kinesis-mock, DynamoDB Local) too.
	GATEWAY_LISTEN=127.0.0.1:$PORT FILESYSTEM_ROOT=$LS_ROOT DNS_ADDRESS=0 SKIP_SSL_CERT_DOWNLOAD=1 \
		CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES=1 LOCALSTACK_AUTH_TOKEN= \
		setsid "$ROOT/$VENV/bin/python" -m localstack.runtime.main > "$OUT/localstack.log" 2>&1 < /dev/null &
	LS_PID=$!
	# It binds its port at once and answers its first AWS request only
	# after building its service catalog (15 s here); the health check
	# answers as soon as it is up.
	for _ in $(seq 240); do
		if curl -fsS -m 2 "$ENDPOINT/_localstack/health" > /dev/null 2>&1; then
			echo "LocalStack $LOCALSTACK_VERSION answers on $ENDPOINT (log: $OUT/localstack.log)"
			return 0
		fi
		kill -0 "$LS_PID" 2> /dev/null || { tail -n 30 "$OUT/localstack.log"; echo "LocalStack exited before answering"; return 1; }
		sleep 0.5
	done
	echo "LocalStack did not answer on $ENDPOINT within 120 s"
	return 1
}
quiet_step "start LocalStack on 127.0.0.1:$PORT (host mode)" start-localstack start_localstack
cat "$OUT/start-localstack.log"

# LocalStack serves DynamoDB with a program it installs on the first
# DynamoDB request (DynamoDB Local, on a Java of its own); where it cannot,
# every table of the deployment fails alike. Ask once, and say why.
dynamodb_on_localstack() {
	if "$ROOT/$VENV/bin/python" - "$ENDPOINT" << 'PY'; then
import sys, boto3
from botocore.config import Config
c = boto3.client("dynamodb", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="test",
                 aws_secret_access_key="test", config=Config(retries={"max_attempts": 1}, read_timeout=180))
try:
    print("DynamoDB answers: %d tables" % len(c.list_tables()["TableNames"]))
except Exception as e:
    sys.exit("ListTables: %s" % e)
PY
		return 0
	fi
	echo "LocalStack's DynamoDB does not answer; what LocalStack logged about installing it:"
	grep -E "Failed to download|Installation of|install" "$OUT/localstack.log" | sed -E 's/^[^ ]+ +[A-Z]+ --- \[[^]]*\] //' | sort -u | head -n 10
	return 1
}
quiet_step "DynamoDB on LocalStack (installed on first use)" dynamodb dynamodb_on_localstack
cat "$OUT/dynamodb.log"

step "make local against LocalStack (TRIBUTARY_STANDIN_ADDR=127.0.0.1:$PORT)" make-local \
	make --no-print-directory local TRIBUTARY_STANDIN_ADDR="127.0.0.1:$PORT"

step "make synth (functions for AWS, linux/arm64, and cdk synth with them)" make-synth \
	make --no-print-directory synth

cdklocal() {
	(cd infra && env AWS_ENDPOINT_URL="$ENDPOINT" AWS_ENDPOINT_URL_S3="$ENDPOINT" AWS_REGION=us-east-1 \
		AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test NODE_PATH="$ROOT/infra/node_modules" \
		"$ROOT/$CDKLOCAL_DIR/node_modules/.bin/cdklocal" --no-notices "$@")
}
step "cdklocal bootstrap --app cdk.out" cdklocal-bootstrap cdklocal bootstrap --app cdk.out
step "cdklocal deploy --app cdk.out" cdklocal-deploy cdklocal deploy --app cdk.out --all --require-approval never --progress events
step "cdklocal destroy --app cdk.out" cdklocal-destroy cdklocal destroy --app cdk.out --all --force
