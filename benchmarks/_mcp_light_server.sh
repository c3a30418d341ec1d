#!/usr/bin/env bash
# A stdio MCP server in bash builtins alone, for benchmarks/mcp.py: it starts in about a
# millisecond, so connecting several at once measures penguin's connect phase, not the
# CPUs. It answers initialize, tools/list (one echo tool) and tools/call (a fixed text),
# and ignores notifications (lines without an "id").
while IFS= read -r line; do
    case $line in *'"id":'*) ;; *) continue ;; esac
    id=${line#*\"id\":}
    id=${id%%[,\}]*}
    case $line in
        *'"method":"initialize"'*)
            version=${line#*\"protocolVersion\":\"}
            version=${version%%\"*}
            result='{"protocolVersion":"'$version'","capabilities":{"tools":{}},"serverInfo":{"name":"light","version":"0"}}'
            ;;
        *'"method":"tools/list"'*)
            result='{"tools":[{"name":"echo","description":"Echo.","inputSchema":{"type":"object","properties":{}}}]}'
            ;;
        *'"method":"tools/call"'*)
            result='{"content":[{"type":"text","text":"echo"}]}'
            ;;
        *)
            result='{}'
            ;;
    esac
    printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$result"
done
