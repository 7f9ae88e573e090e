#!/usr/bin/env bash
# amber's MCP host as the client of the official conformance suite's client scenarios
# (tests/tests/mcp_server.rs): the suite runs `conformance-client.sh URL` with
# MCP_CONFORMANCE_SCENARIO set; this adds URL to the amberd at $AMBER_SOCKET, signs in when
# the server asks for OAuth (the suite's authorization server approves at once: curl plays
# the browser), waits until amberd's host has listed the server's tools, makes the call the
# scenario expects, and removes the server again. $AMBER_CLI is the amber-cli to use.
set -u
url="${*: -1}"
cli="${AMBER_CLI:-amber-cli}"
name="conf$$"
amber() { "$cli" --no-autostart "$@"; }
amber command mcp add "$name" "$url" >&2 || exit 1
trap 'amber command mcp remove "$name" >/dev/null 2>&1' EXIT
signed_in=""
for _ in $(seq 1 100); do
    row="$(amber command mcp list | grep "^$name ")"
    case "$row" in
        "$name ready"*) break ;;
    esac
    if [ -z "$signed_in" ] && [[ "$row" == *"mcp login $name"* ]]; then
        signed_in=1
        out="$(mktemp)"
        timeout 15 "$cli" --no-autostart mcp login "$name" --no-browser >"$out" 2>/dev/null &
        login=$!
        for _ in $(seq 1 50); do [ -s "$out" ] && break; sleep 0.1; done
        curl -s -L --max-redirs 5 -o /dev/null "$(head -1 "$out")"
        # `mcp login` ends once the server is ready with its new tokens, or the login failed
        # (a client that must refuse the authorization server: nothing more to do).
        wait "$login" || break
    fi
    sleep 0.1
done
echo "$row" >&2
case "${MCP_CONFORMANCE_SCENARIO:-}" in
    tools_call) amber command mcp call "$name" add_numbers '{"a": 5, "b": 3}' ;;
esac
