// A minimal MCP Apps host for the browser tests: the official host side (AppBridge from @modelcontextprotocol/ext-apps)
// and the official MCP client, talking to our server through the test's same-origin proxy at /mcp.
// The page's query names the tool, its arguments (JSON), the theme and the frame's width; window.hostRecord keeps
// what the view asked the host for (links, chat messages, tool calls) for the test to read.
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const HOST = { name: "apps-test-host", version: "1.0.0" };
const THEMES = {
  light: {
    "--color-background-primary": "#ffffff", "--color-background-secondary": "#f3f2ee",
    "--color-text-primary": "#1f1e1d", "--color-text-secondary": "#5e5d59", "--color-border-primary": "#dedcd5",
    "--font-sans": "\"DejaVu Sans\", system-ui, sans-serif",
  },
  dark: {
    "--color-background-primary": "#262624", "--color-background-secondary": "#30302e",
    "--color-text-primary": "#f5f4ef", "--color-text-secondary": "#b7b5a9", "--color-border-primary": "#4a4945",
    "--font-sans": "\"DejaVu Sans\", system-ui, sans-serif",
  },
};
const record = (window.hostRecord = { ready: false, failed: null, opened: [], messages: [], calls: [] });

async function main() {
  const query = new URLSearchParams(location.search);
  const tool = query.get("tool");
  const args = JSON.parse(query.get("args") || "{}");
  const theme = query.get("theme") === "dark" ? "dark" : "light";
  document.documentElement.dataset.theme = theme;
  const frame = document.getElementById("frame");
  frame.style.width = (query.get("width") || "640") + "px";

  const client = new Client(HOST, {
    capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  const definition = (await client.listTools()).tools.find((candidate) => candidate.name === tool);
  const uri = getToolUiResourceUri(definition);
  const html = (await client.readResource({ uri })).contents[0].text;

  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");  // an opaque origin: the view reaches nothing but the host
  iframe.title = "Agent runs view";
  iframe.srcdoc = html;
  frame.append(iframe);

  const bridge = new AppBridge(client, HOST, { openLinks: {}, serverTools: {}, message: { text: {} }, logging: {} }, {
    hostContext: {
      theme, styles: { variables: THEMES[theme] }, toolInfo: { tool: definition }, displayMode: "inline",
      platform: "web", locale: "en-GB", timeZone: "UTC",
    },
  });
  window.hostBridge = bridge;  // for the test to change the host's context (its theme) later
  bridge.onopenlink = async ({ url }) => { record.opened.push(url); return {}; };
  bridge.onmessage = async (params) => { record.messages.push(params); return {}; };
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = height + "px"; };
  bridge.oninitialized = async () => {
    try {
      await bridge.sendToolInput({ arguments: args });
      await bridge.sendToolResult(await client.callTool({ name: tool, arguments: args }));
      record.ready = true;
    } catch (error) {
      record.failed = String(error);
    }
  };
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  const forward = bridge.oncalltool;  // the bridge's own proxy to the server, wrapped to note what the view calls
  bridge.oncalltool = async (params, extra) => { record.calls.push(params); return forward(params, extra); };
}

main().catch((error) => { record.failed = String(error && error.stack || error); });
