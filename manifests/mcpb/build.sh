#!/usr/bin/env bash
# Packs the MCP Bundle from a built wheel: manifest.json, pyproject.toml, server/ and the wheel itself under
# wheels/, into OUT_DIR/agent-automation-mcp-<version>.mcpb. The bundle's uv installs that wheel, so what Claude
# Desktop runs is the build that was tested and published, not a rebuild from the source tree.
# Usage: manifests/mcpb/build.sh WHEEL [OUT_DIR]   (OUT_DIR: the wheel's directory). Needs Node.js (npx).
# The wheel: `python .ci/release.py build dist/` (RELEASING.md).
set -euo pipefail
MCPB_VERSION=2.1.2  # the mcpb CLI; tests/test_manifests.py validates with this same version
here="$(cd "$(dirname "$0")" && pwd)"
wheel="${1:?usage: manifests/mcpb/build.sh WHEEL [OUT_DIR]}"
[ -f "$wheel" ] || { echo "no wheel at $wheel: build it with python .ci/release.py build dist/" >&2; exit 2; }
out="$(mkdir -p "${2:-$(dirname "$wheel")}" && cd "${2:-$(dirname "$wheel")}" && pwd)"
version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/manifest.json")"
named="$(sed -n 's/^agent-automation-mcp = { path = "\(.*\)" }$/\1/p' "$here/pyproject.toml")"
if [ "$(basename "$wheel")" != "$(basename "$named")" ]; then
  echo "the bundle's pyproject.toml installs $(basename "$named"), not $(basename "$wheel"): a version copy was missed (python .ci/release.py check)" >&2
  exit 2
fi
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$here/manifest.json" "$here/pyproject.toml" "$stage/"
cp -R "$here/server" "$stage/server"
find "$stage/server" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$stage/$(dirname "$named")"
cp "$wheel" "$stage/$named"
npx --yes --prefer-offline "@anthropic-ai/mcpb@$MCPB_VERSION" pack "$stage" "$out/agent-automation-mcp-$version.mcpb"
