#!/bin/bash
# The sandbox A/B of docs/benchmarks.md ("The OS sandbox (issue 17)"): one amberd with
# [sandbox] mode = "off" (MODE=off) or the default config (MODE=on), the e2e and tools KPIs
# measured by amber-bench through --socket against its scripted endpoint on a fixed port.
# Usage: BIN=target/release amber-bench/bench/sandbox-ab.sh PORT off|on OUT.json
set -u
BIN=${BIN:-target/release}
PORT=$1; MODE=$2; OUT=$3
R=$(mktemp -d /tmp/ab-XXXX); mkdir -p $R/{home,config,data,state,cache,run}; chmod 700 $R/run
printf '[agent]\nconfirm_finish = false\n' > $R/config.toml
[ "$MODE" = off ] && printf '[sandbox]\nmode = "off"\n' >> $R/config.toml
env -u AMBER_SOCKET HOME=$R/home XDG_CONFIG_HOME=$R/config XDG_DATA_HOME=$R/data XDG_STATE_HOME=$R/state XDG_CACHE_HOME=$R/cache XDG_RUNTIME_DIR=$R/run AMBER_LOG=warn \
  AMBER_BASE_URL=http://127.0.0.1:$PORT/v1 AMBER_MODEL=amber-bench AMBER_API_KEY=amber-bench \
  $BIN/amberd --socket $R/run/amberd.sock --config $R/config.toml --data-dir $R/data </dev/null >/dev/null 2>$R/amberd.log &
PID=$!
for i in $(seq 1 200); do [ -S $R/run/amberd.sock ] && break; sleep 0.02; done
sleep 0.3
$BIN/amber-bench --only e2e,tools --socket $R/run/amberd.sock --listen 127.0.0.1:$PORT --json > $OUT 2>$OUT.err
kill $PID; wait $PID 2>/dev/null; rm -rf $R
