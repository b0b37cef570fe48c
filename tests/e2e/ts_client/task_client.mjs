// A third-party MCP client: the TypeScript SDK calls a tool as a 2025-11-25 task and fetches its result.
// Usage: node task_client.mjs <server url> <tool> <arguments as JSON>; the token and organisation come from
// MCP_TOKEN and MCP_ORG. Prints one JSON line per message the SDK yields, then the task as tasks/get and
// tasks/list show it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, tool, args] = process.argv.slice(2);
const headers = { authorization: `Bearer ${process.env.MCP_TOKEN}`, "x-organization-id": process.env.MCP_ORG };
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "ts-task-client", version: "1.0.0" });
await client.connect(transport);
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
say({ type: "protocol", version: transport.protocolVersion, capabilities: client.getServerCapabilities() });
let taskId;
const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: JSON.parse(args) }, undefined,
                                                        { task: { ttl: 600000 }, timeout: 60000 });
for await (const message of stream) {
  if (message.type === "taskCreated") taskId = message.task.taskId;
  say(message.type === "error" ? { type: "error", error: String(message.error) } : message);
}
say({ type: "get", task: await client.experimental.tasks.getTask(taskId) });
say({ type: "list", tasks: (await client.experimental.tasks.listTasks()).tasks.map((task) => task.taskId) });
await client.close();
