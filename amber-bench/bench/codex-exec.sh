#!/bin/sh
# `codex exec` against amber-bench's scripted endpoint, for
#   amber-bench --compare 'amber-bench/bench/codex-exec.sh {prompt}'
# codex 0.17x speaks only the Responses API (it refuses `wire_api = "chat"`); the endpoint
# serves /v1/responses too. $CODEX is the codex binary (default: `codex` on PATH); each run
# gets a fresh CODEX_HOME so no state carries over.
home=$(mktemp -d)
CODEX_HOME=$home "${CODEX:-codex}" exec --skip-git-repo-check \
  --dangerously-bypass-approvals-and-sandbox \
  -c model_provider=bench \
  -c "model_providers.bench={name=\"bench\",base_url=\"$OPENAI_BASE_URL\",wire_api=\"responses\"}" \
  -c model=amber-bench "$1"
code=$?
rm -rf "$home"
exit $code
