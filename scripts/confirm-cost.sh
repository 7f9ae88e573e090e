#!/bin/bash
# Prompt tokens and cost of the two-request task: without the silent confirm exchange, with it
# (a model that never gives the finish signal), and with a model that ends its reply with it.
# The endpoint reports OpenAI-style prefix-cache hits (tests/mock-llm/src/bin/mock-llm.rs).
B="$(cd "$(dirname "$0")/.." && pwd)/target/debug"   # after cargo build --workspace --bins
for scenario in "false" "true" "true --finish-signal"; do
  set -- $scenario; confirm=$1; signal=$2
  d=$(mktemp -d); mkdir -p $d/home/.config/amber $d/run $d/ws; chmod 700 $d/run $d
  cat > $d/home/.config/amber/config.toml <<TOML
[agent]
confirm_finish = $confirm
[[provider.prices]]
model = "gpt-4o-mini"
input = 0.15
output = 0.60
cached = 0.075
TOML
  $B/mock-llm $signal > $d/url & mock=$!
  for i in $(seq 50); do [ -s $d/url ] && break; sleep 0.1; done
  for run in 1 2 3; do
    env -i PATH=/usr/bin:/bin HOME=$d/home XDG_RUNTIME_DIR=$d/run AMBER_BASE_URL=$(head -1 $d/url) AMBER_MODEL=gpt-4o-mini AMBER_API_KEY=k \
      $B/amber-cli run --json --cwd $d/ws "say hello" | tail -1 | python3 -c "
import json,sys
r=json.load(sys.stdin); u=r['usage']; c=r.get('confirmUsage') or {}
print('confirm=$confirm $signal', 'requests', r['numRequests'], 'prompt', u['promptTokens'], 'cached', u.get('cachedTokens'),
      'completion', u['completionTokens'], 'cost', r.get('costUsd'), '| confirm: prompt', c.get('promptTokens', 0),
      'cached', c.get('cachedTokens', 0), 'completion', c.get('completionTokens', 0), 'cost', c.get('costUsd'))"
  done
  HOME=$d/home XDG_RUNTIME_DIR=$d/run $B/amber-cli --no-autostart daemon stop >/dev/null 2>&1
  kill $mock; rm -rf $d
done
