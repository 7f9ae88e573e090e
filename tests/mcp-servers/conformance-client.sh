#!/usr/bin/env bash
# amber's MCP host as the client of the official conformance suite's client scenarios
# (tests/tests/mcp_server.rs): the suite runs `conformance-client.sh URL` with
# MCP_CONFORMANCE_SCENARIO set; this adds URL to the amberd at $AMBER_SOCKET, signs in when
# the server asks for OAuth (the suite's authorization server approves at once: curl plays
# the browser), waits until amberd's host has listed the server's tools, makes the call the
# scenario expects, and removes the server again. $AMBER_CLI is the amber-cli to use.
# The calls: those of MCP_CONFORMANCE_CONTEXT's `toolCalls` when the suite gives them
# (`http-custom-headers`), else the tools the scenario's server offers for its checks.
set -u
url="${*: -1}"
cli="${AMBER_CLI:-amber-cli}"
name="conf$$"
amber() { "$cli" --no-autostart "$@"; }
amber command mcp add "$name" "$url" >&2 || exit 1
trap 'amber command mcp remove "$name" >/dev/null 2>&1' EXIT
# A field of MCP_CONFORMANCE_CONTEXT (empty when absent); jq, else Node.js.
context_field() {
    [ -n "${MCP_CONFORMANCE_CONTEXT:-}" ] || return 0
    if command -v jq >/dev/null 2>&1; then
        jq -r --arg k "$1" '.[$k] // empty' <<<"$MCP_CONFORMANCE_CONTEXT"
    else
        node -e 'const v = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT)[process.argv[1]];
                 if (v !== undefined && v !== null) console.log(v);' "$1"
    fi
}
# A client the suite registered beforehand (`auth/pre-registration`): its id, and its secret
# through the environment.
login_args=(--no-browser)
client_id="$(context_field client_id)"
if [ -n "$client_id" ]; then
    login_args+=(--client-id "$client_id")
    AMBER_CONFORMANCE_SECRET="$(context_field client_secret)"
    export AMBER_CONFORMANCE_SECRET
    [ -n "$AMBER_CONFORMANCE_SECRET" ] && login_args+=(--client-secret-env AMBER_CONFORMANCE_SECRET)
fi
# One sign-in: `mcp login`, curl following its URL. Succeeds when the login went through, or
# when the server asked for authorization again (its authorization server moved: sign in
# again); fails when the login was refused (a client that must refuse the authorization
# server: nothing more to do).
logins=0
sign_in() {
    [ "$logins" -lt 3 ] || return 1
    logins=$((logins + 1))
    local out err login
    out="$(mktemp)"
    err="$(mktemp)"
    timeout 15 "$cli" --no-autostart mcp login "$name" "${login_args[@]}" >"$out" 2>"$err" &
    login=$!
    for _ in $(seq 1 50); do [ -s "$out" ] && break; sleep 0.1; done
    curl -s -L --max-redirs 5 -o /dev/null "$(head -1 "$out")"
    wait "$login" && return 0
    grep -q "mcp login $name" "$err"
}
for _ in $(seq 1 100); do
    row="$(amber command mcp list | grep "^$name ")"
    case "$row" in
        "$name ready"*) break ;;
    esac
    if [[ "$row" == *"mcp login $name"* ]]; then
        sign_in || break
    fi
    sleep 0.1
done
echo "$row" >&2
failed=0
call() {
    local args="${2:-}"
    [ -n "$args" ] || args='{}'
    amber command mcp call "$name" "$1" "$args" </dev/null || failed=1
}
# Each call of MCP_CONFORMANCE_CONTEXT's toolCalls as a line `TOOL JSON` (compact JSON, a
# newline in a string escaped); jq, else Node.js.
context_calls() {
    [ -n "${MCP_CONFORMANCE_CONTEXT:-}" ] || return 0
    if command -v jq >/dev/null 2>&1; then
        jq -rc '.toolCalls[]? | "\(.name) \(.arguments // {} | tojson)"' <<<"$MCP_CONFORMANCE_CONTEXT"
    else
        node -e '
            const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT);
            for (const { name, arguments: args } of context.toolCalls ?? []) {
                console.log(`${name} ${JSON.stringify(args ?? {})}`);
            }'
    fi
}
calls="$(context_calls)"
if [ -n "$calls" ]; then
    while IFS= read -r line; do call "${line%% *}" "${line#* }"; done <<<"$calls"
else
    case "${MCP_CONFORMANCE_SCENARIO:-}" in
        tools_call) call add_numbers '{"a":5,"b":3}' ;;
        # The tool needs a scope beyond the first token's (403 insufficient_scope): sign in
        # again, for the union of the scopes, and call it again.
        auth/scope-step-up)
            if ! amber command mcp call "$name" test-tool '{}' </dev/null; then
                sign_in && call test-tool
            fi
            ;;
        # Its invalid tools amber's host drops (SEP-2243); the valid one stays callable.
        http-invalid-tool-headers) call valid_tool '{"region":"us-west1"}' ;;
        # Multi-round-trip requests (SEP-2322): amberd answers `input_required` and retries
        # with the server's requestState (none when it sent none); the unrelated call between
        # them must carry neither; a result without resultType is complete.
        sep-2322-client-request-state)
            for tool in test_mrtr_echo_state test_mrtr_no_state test_mrtr_unrelated \
                test_mrtr_no_result_type; do
                call "$tool"
            done
            ;;
        # Its form asks to be accepted with the schema's defaults (SEP-1034): a `/mcp call`
        # runs outside any session, with nobody to ask, so `--defaults` takes them.
        elicitation-sep1034-client-defaults)
            amber command mcp call --defaults "$name" test_client_elicitation_defaults '{}' \
                </dev/null || failed=1
            ;;
        # The call's SSE stream closes early; its result comes on the GET stream the client
        # reopens after the event's `retry` with Last-Event-ID (SEP-1699).
        sse-retry) call test_reconnection ;;
    esac
fi
exit "$failed"
