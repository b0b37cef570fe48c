// One session of the TypeScript SDK's client: connect, call list_models twice (the GET stream it opens after
// initialize in the legacy era has time to be tried), print what happened as one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, headersJson] = process.argv.slice(2);
const client = new Client({ name: "ts-probe", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: JSON.parse(headersJson || "{}") },
});
const result = { calls: [], error: null };
try {
  await client.connect(transport);
  for (let i = 0; i < 2; i++) {
    const answer = await client.callTool({ name: "list_models", arguments: {} });
    result.calls.push(answer.isError ? "error" : "ok");
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
} catch (error) {
  result.error = String(error.message);
}
await client.close().catch(() => {});
console.log(JSON.stringify(result));
