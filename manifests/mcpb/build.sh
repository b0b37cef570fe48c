#!/usr/bin/env bash
# Packs the MCP Bundle (manifest.json, pyproject.toml, server/) into OUT_DIR/agent-automation-mcp-<version>.mcpb.
# Usage: manifests/mcpb/build.sh [OUT_DIR]   (default: dist/). Needs Node.js (npx).
set -euo pipefail
MCPB_VERSION=2.1.2  # the mcpb CLI; tests/test_manifests.py validates with this same version
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here/../../dist}" && cd "${1:-$here/../../dist}" && pwd)"
version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/manifest.json")"
npx --yes --prefer-offline "@anthropic-ai/mcpb@$MCPB_VERSION" pack "$here" "$out/agent-automation-mcp-$version.mcpb"
